import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * The shutdown notice (interruptRelays, 5 s before SHUTDOWN_GRACE_MS ends) reaches Responses creates as
 * it reaches chat: a stream gets a `server_shutting_down` error event without an id, a create answered
 * whole a 503 (they were cut with a connection reset at the grace's end). The response goes on.
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

  it("tells a stream's client and a whole create's client, and the response goes on", async () => {
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
    expect(await answered.json()).toMatchObject({ error: { code: "server_shutting_down" } });
    // The response goes on and is charged once, whole.
    const wholeId = answered.headers.get("x-completion-id")!;
    const events = await eventually(async () => {
      const found = await completionEvents(platform.deps.pool, wholeId);
      return found.length > 0 ? found : undefined;
    }, 20_000);
    expect(events[0]!.data).toMatchObject({ outcome: "finished" });
  }, 60_000);
});
