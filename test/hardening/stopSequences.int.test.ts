import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineChatRequestSchema, MAX_STOP_SEQUENCE_CHARS } from "../../src/contracts/engineRequestSchemas.ts";
import { expectApiError } from "../accounts/accountSteps.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A stop sequence is bounded (MAX_STOP_SEQUENCE_CHARS): the embedded engine's stop detector keeps a map
 * per character of each sequence, so four sequences of a megabyte cost a worker seconds of blocking and
 * close to a gigabyte of heap per job. A longer one is a 400 naming it, before anything is queued.
 */
let platform: TestPlatform;
let key: string;
beforeAll(async () => {
  platform = await startTestPlatform();
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await platform?.close();
});

const LONG = "x".repeat(100_000);
const user = [{ role: "user", content: "Hi" }];

describe("a stop sequence longer than the bound is a 400 naming it", () => {
  it.each([
    ["/v1/chat/completions", { model: TINY_CHAT, messages: user, max_tokens: 2, stop: LONG }, "stop"],
    ["/v1/chat/completions", { model: TINY_CHAT, messages: user, max_tokens: 2, stop: LONG, stream: true }, "stop"],
    ["/v1/chat/completions", { model: TINY_CHAT, messages: user, max_tokens: 2, stop: ["ok", LONG] }, "stop[1]"],
    ["/v1/chat/completions", { model: TINY_CHAT, messages: user, max_tokens: 2, stop: ["a", "b", "c", "x".repeat(MAX_STOP_SEQUENCE_CHARS + 1)] }, "stop[3]"],
    ["/v1/completions", { model: TINY_CHAT, prompt: "Hi", max_tokens: 2, stop: LONG }, "stop"],
    ["/v1/completions", { model: TINY_CHAT, prompt: ["Hi", "there"], max_tokens: 2, stop: [LONG] }, "stop[0]"],
    ["/v1/responses", { model: TINY_CHAT, input: "Hi", max_output_tokens: 16, stop: LONG }, "stop"],
    ["/v1/responses", { model: TINY_CHAT, input: "Hi", max_output_tokens: 16, stop: ["ok", LONG], stream: true }, "stop[1]"],
  ])("%s %#: 400 invalid_value naming %s", async (path, body, param) => {
    const res = await platform.request("POST", path, { token: key, body });
    expectApiError(res, 400, "invalid_request_error", { code: "invalid_value", param });
    expect(res.body.error.message).toContain(`at most ${MAX_STOP_SEQUENCE_CHARS} characters`);
  });

  it("the Responses API refuses a stop that is not one, as chat does", async () => {
    const res = await platform.request("POST", "/v1/responses", { token: key, body: { model: TINY_CHAT, input: "Hi", max_output_tokens: 16, stop: 3 } });
    expectApiError(res, 400, "invalid_request_error", { code: "invalid_value", param: "stop" });
  });
});

describe("stop sequences within the bound still work", () => {
  it("chat: a normal stop cuts the reply before it", async () => {
    const res = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: { model: TINY_CHAT, messages: user, temperature: 0, stop: [" tiny"] },
    });
    expect(res.status, res.text).toBe(200);
    const greedy = platform.tiny.greedyReply;
    expect(res.body.choices[0].finish_reason).toBe("stop");
    expect(res.body.choices[0].message.content).toBe(greedy.slice(0, greedy.indexOf(" tiny")));
  });

  it("chat: a stop of exactly the bound is taken", async () => {
    const stop = ["y".repeat(MAX_STOP_SEQUENCE_CHARS), " tiny"];
    const res = await platform.request("POST", "/v1/chat/completions", { token: key, body: { model: TINY_CHAT, messages: user, temperature: 0, stop } });
    expect(res.status, res.text).toBe(200);
    const greedy = platform.tiny.greedyReply;
    expect(res.body.choices[0].message.content).toBe(greedy.slice(0, greedy.indexOf(" tiny")));
  });

  it("completions and responses: a normal stop is taken", async () => {
    const completion = await platform.request("POST", "/v1/completions", { token: key, body: { model: TINY_CHAT, prompt: "Hi", max_tokens: 8, stop: "\n\n" } });
    expect(completion.status, completion.text).toBe(200);
    const response = await platform.request("POST", "/v1/responses", {
      token: key,
      body: { model: TINY_CHAT, input: "Hi", max_output_tokens: 16, stop: [" tiny"] },
    });
    expect(response.status, response.text).toBe(200);
    expect(["completed", "incomplete"]).toContain(response.body.status);
  });
});

describe("the engine request a job carries bounds its stop sequences too (a second line of defence)", () => {
  const request = (stop: string[]) => ({ messages: [{ role: "user", content: "Hi" }], maxTokens: 4, stop });
  it("refuses a sequence over the bound, more than four, or an empty one", () => {
    expect(EngineChatRequestSchema.safeParse(request([LONG])).success).toBe(false);
    expect(EngineChatRequestSchema.safeParse(request(["x".repeat(MAX_STOP_SEQUENCE_CHARS + 1)])).success).toBe(false);
    expect(EngineChatRequestSchema.safeParse(request(["a", "b", "c", "d", "e"])).success).toBe(false);
    expect(EngineChatRequestSchema.safeParse(request([""])).success).toBe(false);
  });
  it("takes up to four within it", () => {
    expect(EngineChatRequestSchema.safeParse(request(["a", "b", "c", "x".repeat(MAX_STOP_SEQUENCE_CHARS)])).success).toBe(true);
  });
});
