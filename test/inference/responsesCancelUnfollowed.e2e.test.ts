import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * A background response cancelled through an API process that does not follow it (the process that
 * created it was killed, and none took it over yet): the cancel answers the output so far and the usage
 * charged, and the stored response keeps them (a probe's stored response had neither, while charged).
 */
/** The text of a Response object's messages (a cancel's answer has no SDK `output_text`). */
function textOf(response: { output: unknown[] }): string {
  return (response.output as { type: string; content?: { text?: string }[] }[])
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content ?? [])
    .map((part) => part.text ?? "")
    .join("");
}

describe("cancelling a response no process here follows", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, 100), env: { DELTA_COALESCE_MS: "0" } });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("stores the cancelled response's output and usage, equal to its charge", async () => {
    const openai = platform.openai(key);
    const created = await openai.responses.create({ model: TINY_CHAT, input: "Tell me a long story", max_output_tokens: 60, temperature: 0, background: true });
    await eventually(async () => ((await openai.responses.retrieve(created.id)).output_text.length > 0 ? true : undefined), 10_000);
    // As when the process following it is gone: nobody here follows it any more.
    await platform.inference.responses.close();
    const cancelled = await openai.responses.cancel(created.id);
    expect(cancelled.status).toBe("cancelled");
    expect(textOf(cancelled).length).toBeGreaterThan(0);
    const [charge] = await eventually(async () => {
      const found = await completionEvents(platform.deps.pool, created.id);
      return found.length > 0 ? found : undefined;
    }, 10_000);
    const stored = await openai.responses.retrieve(created.id);
    expect(stored.status).toBe("cancelled");
    expect(textOf(stored)).toBe(textOf(cancelled));
    expect(stored.usage?.output_tokens).toBe(charge!.data.completionTokens);
    // Cancelled again: unchanged.
    expect(textOf(await openai.responses.cancel(created.id))).toBe(textOf(cancelled));
  }, 60_000);

  it("a previous_response_id of a response that ended while no process followed it is taken at once (it was 400 'still in_progress' until a takeover)", async () => {
    const openai = platform.openai(key);
    await platform.inference.responses.close();
    const created = await openai.responses.create({ model: TINY_CHAT, input: "Say hi", max_output_tokens: 8, temperature: 0, background: true });
    await eventually(
      async () =>
        (await openai.responses.retrieve(created.id)).status !== "queued" && (await completionEvents(platform.deps.pool, created.id)).length > 0
          ? true
          : undefined,
      20_000,
    );
    await eventually(async () => (platform.inference.responses.run(created.id) === undefined ? true : undefined), 10_000);
    // As its row stands when the process that followed it was killed before it wrote the end.
    await platform.deps.pool.query("UPDATE responses SET status = 'in_progress', output_items = '[]', usage = NULL, completed_at = NULL WHERE id = $1", [
      created.id,
    ]);
    const next = await openai.responses.create({
      model: TINY_CHAT,
      input: "And again",
      max_output_tokens: 4,
      temperature: 0,
      previous_response_id: created.id,
    });
    expect(next.status).toMatch(/^(completed|incomplete)$/);
    const stored = await openai.responses.retrieve(created.id);
    expect(stored.status).toMatch(/^(completed|incomplete)$/);
    expect(textOf(stored).length).toBeGreaterThan(0);
  }, 60_000);
});
