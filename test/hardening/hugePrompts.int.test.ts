import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";
import { expectApiError } from "../accounts/accountSteps.ts";

/** The platform runs its worker (and so the embedded engine) in this process, as `npm start` does. */
let platform: TestPlatform;
let key: string;
beforeAll(async () => {
  platform = await startTestPlatform({ env: { MAX_REQUEST_BODY_BYTES: String(4 * 1024 * 1024) } });
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await platform?.close();
});

const THREE_MB = "All work and no play makes Jack a dull boy. ".repeat(Math.ceil((3 * 1024 * 1024) / 44));

/** Runs `work` while polling /healthz; the slowest health answer seen meanwhile. */
async function slowestHealthDuring(work: () => Promise<unknown>): Promise<number> {
  let done = false;
  let slowest = 0;
  const poll = (async () => {
    while (!done) {
      const started = performance.now();
      const res = await fetch(`${platform.baseUrl}/healthz`);
      await res.arrayBuffer();
      slowest = Math.max(slowest, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  try {
    await work();
  } finally {
    done = true;
    await poll;
  }
  return slowest;
}

describe("huge prompts are refused before anything tokenizes them", () => {
  it.each([
    ["/v1/chat/completions", { model: TINY_CHAT, messages: [{ role: "user", content: THREE_MB }], max_tokens: 2 }, "messages"],
    ["/v1/chat/completions", { model: TINY_CHAT, messages: [{ role: "user", content: THREE_MB }], max_tokens: 2, stream: true }, "messages"],
    ["/v1/completions", { model: TINY_CHAT, prompt: THREE_MB, max_tokens: 2 }, "prompt"],
    ["/v1/embeddings", { model: TINY_EMBED, input: THREE_MB }, "input"],
    ["/v1/embeddings", { model: TINY_EMBED, input: ["short", THREE_MB] }, "input[1]"],
  ])("%s: a 3 MB prompt is a 400 context_length_exceeded while /healthz stays responsive", async (path, body, param) => {
    let res: Awaited<ReturnType<TestPlatform["request"]>> | undefined;
    const slowest = await slowestHealthDuring(async () => {
      res = await platform.request("POST", path, { token: key, body });
    });
    expectApiError(res!, 400, "invalid_request_error", { code: "context_length_exceeded", param });
    expect(res!.body.error.message).toContain("1024-token context");
    expect(slowest, `slowest /healthz answer ${slowest.toFixed(0)} ms`).toBeLessThan(500);
  });

  it("refuses a response_format schema longer than the context takes before compiling it (its tens of thousands of values cost the event loop hundreds of milliseconds first)", async () => {
    // 999 properties of 20 values each: some 40,000 schema values, far more characters than the context.
    const properties = Object.fromEntries(
      Array.from({ length: 999 }, (_, i) => [`p${i}`, { type: "string", enum: Array.from({ length: 18 }, (_, k) => `v${k}`) }]),
    );
    const res = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: {
        model: TINY_CHAT,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 2,
        // A type that does not exist makes the schema itself invalid: refused for it only once compiled.
        response_format: {
          type: "json_schema",
          json_schema: { name: "big", schema: { type: "object", properties: { ...properties, bad: { type: "no-such-type" } } } },
        },
      },
    });
    expectApiError(res, 400, "invalid_request_error", { code: "context_length_exceeded" });
  });

  it("refuses a body over the size limit with 413 in the OpenAI shape", async () => {
    const res = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: { model: TINY_CHAT, messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }] },
    });
    expectApiError(res, 413, "invalid_request_error", { code: "request_too_large" });
  });

  it("still serves a prompt near the bound that fits, and lets the engine refuse one whose tokens do not", async () => {
    const ok = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hello there" }], max_tokens: 2 },
    });
    expect(ok.status, ok.text).toBe(200);
    const overTokens = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: { model: TINY_CHAT, messages: [{ role: "user", content: "word ".repeat(1600) }], max_tokens: 2 },
    });
    expectApiError(overTokens, 400, "invalid_request_error", { param: "messages" });
  });
});
