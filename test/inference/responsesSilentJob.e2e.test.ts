import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionEvents, parseSse } from "./inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { pacedEngine } from "./pacedEngine.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A response's job that falls silent mid-stream (its worker stalled or lost, none taking it over) for
 * JOB_IDLE_TIMEOUT_MS: the client's stream ends with an `error` event saying so, on the create's stream
 * and on a GET's (a probe's client got keep-alives for 12 minutes, long after the response was stored
 * failed).
 */
describe("a Responses stream whose job falls silent", () => {
  let platform: TestPlatform;
  let silent = false;
  /** One pause of this long before the next delta (then as before). */
  let pauseOnce = 0;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      wrapEngine: (_model, engine) =>
        pacedEngine(engine, () => {
          const pause = pauseOnce;
          pauseOnce = 0;
          return pause > 0 ? pause : silent ? 60_000 : 40;
        }),
      env: { JOB_IDLE_TIMEOUT_MS: "1500", DELTA_COALESCE_MS: "0" },
    });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("ends the create's stream and a GET's with an error event after the idle timeout, not keep-alives for ever", async () => {
    silent = false;
    const response = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, input: "Tell me a long story", max_output_tokens: 60, temperature: 0, stream: true }),
      signal: AbortSignal.timeout(20_000),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let raw = "";
    let id = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      raw += decoder.decode(value, { stream: true });
      id ||= /"id":"(resp_[A-Za-z0-9]+)"/.exec(raw)?.[1] ?? "";
      if (!silent && raw.includes("response.output_text.delta")) silent = true;
    }
    const events = parseSse(raw).map((e) => JSON.parse(e.data) as { type: string; code?: string; sequence_number: number });
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: "error", code: "server_error" });
    // Numbered as the last event sent: the client's resume point (the next real event keeps its number).
    expect(last.sequence_number).toBe(events.at(-2)!.sequence_number);
    // A GET's stream of it, while it is still silent: ends the same way.
    const again = await fetch(`${platform.baseUrl}/v1/responses/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(20_000),
    });
    const replayed = parseSse(await again.text()).map((e) => JSON.parse(e.data) as { type: string; code?: string });
    expect(replayed.at(-1)).toMatchObject({ type: expect.stringMatching(/^(error|response\.failed)$/) });
    silent = false;
  }, 60_000);

  it("a background response's job silent past the idle timeout is not stopped: it goes on when its worker does, charged whole", async () => {
    silent = false;
    const created = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, input: "Tell me a long story", max_output_tokens: 40, temperature: 0, background: true }),
    });
    const { id } = (await created.json()) as { id: string };
    // Silent for twice the idle timeout once it generates, then on again.
    await eventually(async () => {
      const current = await fetch(`${platform.baseUrl}/v1/responses/${id}`, { headers: { authorization: `Bearer ${key}` } });
      const body = (await current.json()) as { output_text?: string; output?: { content?: { text: string }[] }[] };
      return (body.output?.[0]?.content?.[0]?.text ?? "").length > 0 ? true : undefined;
    }, 10_000);
    pauseOnce = 3_000;
    const events = await eventually(async () => {
      const found = await completionEvents(platform.deps.pool, id);
      return found.length > 0 ? found : undefined;
    }, 90_000);
    expect(events[0]!.data).toMatchObject({ outcome: "finished" });
  }, 120_000);

  it("a response answered whole (not streamed) whose job falls silent is a 500, as a chat completion's, not a 200 in_progress", async () => {
    silent = false;
    pauseOnce = 0;
    const request = fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, input: "Tell me a long story", max_output_tokens: 60, temperature: 0 }),
      signal: AbortSignal.timeout(20_000),
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    silent = true;
    const response = await request;
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ error: { type: "api_error", message: "The model stopped answering." } });
    silent = false;
  }, 60_000);

  it("a running response whose replay stream lost its start (Redis restarted empty) is not streamed from the cut replay: an error event says so", async () => {
    silent = false;
    const created = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, input: "Tell me a long story", max_output_tokens: 60, temperature: 0, background: true }),
    });
    const { id } = (await created.json()) as { id: string };
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    const entries = await eventually(async () => {
      const found = await platform.deps.redis.xrange(keys.replayStream(id), "-", "+");
      return found.length >= 3 ? found : undefined;
    }, 10_000);
    silent = true;
    await platform.deps.redis.xdel(keys.replayStream(id), entries[0]![0]);
    const streamed = await fetch(`${platform.baseUrl}/v1/responses/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(20_000),
    });
    const events = parseSse(await streamed.text()).map((e) => JSON.parse(e.data) as { type: string; message?: string });
    expect(events.some((e) => e.type === "response.output_text.delta")).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: "error", message: expect.stringContaining("lost with Redis") });
    silent = false;
    await fetch(`${platform.baseUrl}/v1/responses/${id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
  }, 60_000);
});
