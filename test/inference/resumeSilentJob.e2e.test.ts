import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSse } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A chat stream resumed (Last-Event-ID) whose job then stays silent for JOB_IDLE_TIMEOUT_MS: the error
 * event that ends it carries no id (a probe saw `id: 1` after `Last-Event-ID: 80`, which a client
 * resuming again would take as its place; numbered after the resume point, it took the number of the
 * reply's next event): a client resuming again does so from its resume point.
 */
describe("a resumed chat stream whose job falls silent", () => {
  let platform: TestPlatform;
  let silent = false;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      wrapEngine: (_model, engine) => pacedEngine(engine, () => (silent ? 60_000 : 40)),
      env: { JOB_IDLE_TIMEOUT_MS: "1500", DELTA_COALESCE_MS: "0", COMPLETION_ABANDON_GRACE_MS: "60000" },
    });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("ends with an error event without an id, the resume point kept", async () => {
    const controller = new AbortController();
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a long story" }], max_tokens: 40, temperature: 0, stream: true }),
      signal: controller.signal,
    });
    const id = response.headers.get("x-completion-id")!;
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let raw = "";
    while (parseSse(raw.slice(0, raw.lastIndexOf("\n\n") + 2)).length < 4) raw += decoder.decode((await reader.read()).value, { stream: true });
    silent = true;
    controller.abort();
    // Resumed at the job's last message so far (the one in flight when it fell silent included).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const lastId = (await platform.inference.records.lastMessage(id))!.seq;
    const resumed = await fetch(`${platform.baseUrl}/v1/chat/completions/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": String(lastId) },
      signal: AbortSignal.timeout(20_000),
    });
    const events = parseSse(await resumed.text());
    const error = events.find((e) => e.data.includes('"error"'))!;
    expect(JSON.parse(error.data)).toMatchObject({ error: { message: expect.stringContaining("stopped answering") } });
    expect(error.id).toBeUndefined();
    silent = false;
    // Its job is stopped (else it would hold the platform's close for its minute of silence).
    await fetch(`${platform.baseUrl}/v1/chat/completions/${id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
  }, 60_000);
});
