import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { openHolds } from "../usage/usageFixtures.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { SseReader } from "./sseReader.ts";

type Event = { type: string; sequence_number: number } & Record<string, unknown>;

/** The stream events read so far (comments skipped), and a promise of the rest up to the end. */
function collect(reader: SseReader): { events: Event[]; done: Promise<void> } {
  const events: Event[] = [];
  const done = (async () => {
    for (let item = await reader.next(); item; item = await reader.next()) {
      if (item.data !== undefined) events.push(JSON.parse(item.data) as Event);
    }
  })();
  done.catch(() => undefined);
  return { events, done };
}

/**
 * A background response waits in line as long as it takes: past the start timeout (1.5 s here) and
 * through a stop of the API process that created it (no worker consumes the queue at first, a worker's
 * presence is faked as in resumableCompletions' "waiting in line"). Once a worker starts, another API
 * process's recovery pass follows it to its end, charged once.
 */
describe("a background response waiting in line", () => {
  let platform: TestPlatform;
  let key: string;
  let accountId: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ startWorker: false, env: { JOB_START_TIMEOUT_STREAM_MS: "1500", DELTA_COALESCE_MS: "0" } });
    const created = await platform.createKey();
    key = created.key;
    accountId = created.account.accountId;
    await platform.deps.redis.zadd(`${platform.deps.config.redisPrefix}:workers:${TINY_CHAT}`, Date.now() + 600_000, "test-presence");
  });
  afterAll(async () => {
    await platform?.close();
  });

  const request = { model: TINY_CHAT, input: "Hi", background: true, temperature: 0 } as const;

  it("stays queued past the start timeout and through a stop of its API process, then completes once a worker comes, charged once", async () => {
    const second = await startSecondApi(platform);
    const viaSecond = new OpenAI({ baseURL: `${second.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
    const fromSecond = await viaSecond.responses.create(request);
    const openai = platform.openai(key);
    const fromHere = await openai.responses.create(request);
    expect([fromSecond.status, fromHere.status]).toEqual(["queued", "queued"]);

    // Past this process's start timeout: still in line (not failed, not taken off the queue).
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await openai.responses.retrieve(fromHere.id)).status).toBe("queued");
    await second.close();
    expect((await openai.responses.retrieve(fromSecond.id)).status).toBe("queued");

    // The GET stream of a queued response: created and queued, and nothing more until its job starts.
    const live = await fetch(`${platform.baseUrl}/v1/responses/${fromHere.id}?stream=true`, { headers: { authorization: `Bearer ${key}` } });
    expect(live.status).toBe(200);
    const stream = collect(new SseReader(live));
    await eventually(async () => (stream.events.length >= 2 ? true : undefined), 5_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(stream.events.map((e) => e.type)).toEqual(["response.created", "response.queued"]);

    // The stopped process's lease runs out (30 s in production): this process takes its response over.
    await platform.deps.pool.query("UPDATE responses SET follow_until = now() - interval '1 second' WHERE id = $1", [fromSecond.id]);
    await platform.inference.responses.tick();
    await platform.startWorker();

    await stream.done;
    const types = stream.events.map((e) => e.type);
    expect(types.slice(0, 3)).toEqual(["response.created", "response.queued", "response.in_progress"]);
    expect(types.at(-1)).toBe("response.completed");
    expect(stream.events.map((e) => e.sequence_number)).toEqual(stream.events.map((_, i) => i));

    for (const id of [fromSecond.id, fromHere.id]) {
      const done = await eventually(async () => {
        const response = await openai.responses.retrieve(id);
        return ["completed", "incomplete", "failed", "cancelled"].includes(response.status!) ? response : undefined;
      }, 30_000);
      expect(done.status).toBe("completed");
      expect(done.output_text).toBe(platform.tiny.greedyReply);
      const events = await eventually(async () => {
        const recorded = await completionEvents(platform.deps.pool, id);
        return recorded.length > 0 ? recorded : undefined;
      }, 10_000);
      expect(events).toHaveLength(1);
      expect(events[0]!.data).toMatchObject({ endpoint: "responses", completionTokens: done.usage!.output_tokens, promptTokens: done.usage!.input_tokens });
    }
    await eventually(async () => ((await openHolds(platform.deps.pool, accountId)) === 0 ? true : undefined), 10_000);
  }, 90_000);
});
