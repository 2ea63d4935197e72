import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * A background response outlives the API process that created it: once that process stopped (its lease
 * on the response ran out), another API process's recovery pass follows the job on from its replay
 * stream and stores the result, charged once.
 */
describe("a background response whose API process stops", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, 80), env: { DELTA_COALESCE_MS: "0" } });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("is completed and stored by another API process's recovery pass", async () => {
    const second = await startSecondApi(platform);
    const viaSecond = new OpenAI({ baseURL: `${second.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
    const queued = await viaSecond.responses.create({ model: TINY_CHAT, input: "Tell me a story", background: true, max_output_tokens: 30, temperature: 0 });
    await eventually(async () => ((await viaSecond.responses.retrieve(queued.id)).status === "in_progress" ? true : undefined), 10_000);
    await second.close();
    // Its lease runs out (30 s in production), then a tick of this process takes the response over.
    await platform.deps.pool.query("UPDATE responses SET follow_until = now() - interval '1 second' WHERE id = $1", [queued.id]);
    await platform.inference.responses.tick();
    const openai = platform.openai(key);
    const done = await eventually(async () => {
      const response = await openai.responses.retrieve(queued.id);
      return ["completed", "incomplete"].includes(response.status!) ? response : undefined;
    }, 20_000);
    // The API answers from the job's replay stream as soon as it ended; the recovering process stores the
    // finished object right after (once its usage is recorded): the row follows within moments.
    const row = await eventually(async () => {
      const { rows } = await platform.deps.pool.query<{ status: string }>("SELECT status, usage FROM responses WHERE id = $1", [queued.id]);
      return rows[0]?.status === done.status ? rows[0] : undefined;
    }, 10_000);
    expect(row.status).toBe(done.status);
    expect(done.usage!.output_tokens).toBeGreaterThan(0);
    const reference = await openai.responses.create({ model: TINY_CHAT, input: "Tell me a story", max_output_tokens: 30, temperature: 0 });
    expect(done.output_text).toBe(reference.output_text);
    const events = await completionEvents(platform.deps.pool, queued.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.completionTokens).toBe(done.usage!.output_tokens);
  }, 60_000);
});
