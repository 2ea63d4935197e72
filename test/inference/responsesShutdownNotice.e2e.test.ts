import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * The shutdown notice (interruptRelays, 5 s before SHUTDOWN_GRACE_MS ends) reaches Responses creates as
 * it reaches chat: a stream gets a `server_shutting_down` error event without an id, a create answered
 * whole a 503 (they were cut with a connection reset at the grace's end). A stream's response goes on;
 * a whole create's is stopped, charged nothing, for the retry its 503 asks for.
 */
describe("a Responses create when its API process is about to stop", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, 150), env: { DELTA_COALESCE_MS: "0" } });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("tells a stream's client and a whole create's client; the stream's response goes on, the whole one's is stopped", async () => {
    const create = (stream: boolean) =>
      fetch(`${platform.baseUrl}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, input: "Tell me a long story", max_output_tokens: 40, temperature: 0, stream }),
        signal: AbortSignal.timeout(30_000),
      });
    const streamed = await create(true);
    const whole = create(false);
    const reader = streamed.body!.getReader();
    const decoder = new TextDecoder();
    let raw = "";
    while (!raw.includes("response.output_text.delta")) raw += decoder.decode((await reader.read()).value, { stream: true });
    expect(platform.inference.interruptRelays()).toBeGreaterThanOrEqual(2);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      raw += decoder.decode(value, { stream: true });
    }
    const last = raw.trim().split("\n\n").at(-1)!;
    expect(last).not.toMatch(/^id:/m);
    expect(
      JSON.parse(
        last
          .split("\n")
          .find((l) => l.startsWith("data: "))!
          .slice(6),
      ),
    ).toMatchObject({ type: "error", code: "server_shutting_down" });
    // Numbered as the last event sent (the client's resume point): the next real event keeps its own
    // number, and a client that resumes after the highest number it saw (the SDKs show no SSE id) gets it.
    const blocks = raw.trim().split("\n\n");
    const numberOf = (block: string) =>
      (
        JSON.parse(
          block
            .split("\n")
            .find((l) => l.startsWith("data: "))!
            .slice(6),
        ) as { sequence_number: number }
      ).sequence_number;
    const lastSent = blocks.at(-2)!;
    expect(lastSent).toMatch(/^id: /m);
    expect(numberOf(last)).toBe(numberOf(lastSent));
    const answered = await whole;
    expect(answered.status).toBe(503);
    expect(await answered.json()).toMatchObject({ error: { code: "server_shutting_down", message: expect.stringContaining("Retry it") } });
    // Its client got nothing and is told to retry (as the SDKs do): its job is stopped, charged nothing
    // (it went on, and the retry was charged a second time), and the stored response says it failed.
    const wholeId = answered.headers.get("x-completion-id")!;
    const events = await eventually(async () => {
      const found = await completionEvents(platform.deps.pool, wholeId);
      return found.length > 0 ? found : undefined;
    }, 20_000);
    expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled", completionTokens: 0, costMicroChf: 0 });
    const stored = await eventually(async () => {
      const read = (await (await fetch(`${platform.baseUrl}/v1/responses/${wholeId}`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        status: string;
        error: { code: string } | null;
      };
      return read.status === "in_progress" ? undefined : read;
    }, 20_000);
    expect(stored).toMatchObject({ status: "failed", error: { code: "server_error" } });
  }, 60_000);
});
