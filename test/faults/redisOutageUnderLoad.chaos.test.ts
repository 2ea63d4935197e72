import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HoldSweeper } from "../../src/ledger/budget/holdSweeper.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { expectDependencyUnavailable, timed } from "./faultSteps.ts";

/**
 * The scenario (slow: `npm run chaos` only): Redis goes down for 5 s while 200 requests are
 * queued or running. Requests made during the outage answer 503 within 2 s; every queued request ends
 * within the job timeouts instead of hanging, answered or refused with 503 redis_unavailable (never a
 * 500); the service works after the outage.
 */
const QUEUED = 200;
const OUTAGE_MS = 5000;
const JOB_START_TIMEOUT_MS = 3000;
const JOB_IDLE_TIMEOUT_MS = 5000;

let redis: RedisServer;
let platform: TestPlatform;
let key: string;

beforeAll(async () => {
  redis = await startRedisServer();
  platform = await startTestPlatform({
    redisUrl: redis.url,
    env: { JOB_START_TIMEOUT_MS: String(JOB_START_TIMEOUT_MS), JOB_IDLE_TIMEOUT_MS: String(JOB_IDLE_TIMEOUT_MS) },
  });
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await redis?.start();
  await platform?.close();
  await redis?.stop();
});

const chat = () =>
  platform.request("POST", "/v1/chat/completions", {
    token: key,
    body: { model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 8 },
  });

describe("Redis outage under load", () => {
  it(`ends all of ${QUEUED} queued requests, refuses new ones at once for ${OUTAGE_MS / 1000} s, then serves again`, async () => {
    expect((await chat()).status).toBe(200);
    const started = performance.now();
    let answered = 0;
    const queued = Array.from({ length: QUEUED }, () =>
      timed(chat()).then((res) => {
        answered++;
        return res;
      }),
    );
    // The outage starts once jobs run and the rest are queued behind them.
    await eventually(async () => (answered >= 10 ? true : undefined), 60_000);

    await redis.stop();
    const outageEnds = performance.now() + OUTAGE_MS;
    const during = [];
    while (performance.now() < outageEnds - 1000) {
      during.push(await timed(chat()));
      await new Promise((r) => setTimeout(r, 500));
    }
    await new Promise((r) => setTimeout(r, Math.max(0, outageEnds - performance.now())));
    await redis.start();

    for (const [i, res] of during.entries()) expectDependencyUnavailable(res, "redis_unavailable", `request ${i} during the outage`);
    const results = await Promise.all(queued);
    const bound = OUTAGE_MS + JOB_START_TIMEOUT_MS + JOB_IDLE_TIMEOUT_MS + 10_000;
    const statuses = new Map<number, number>();
    for (const res of results) statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    expect(performance.now() - started, `statuses ${JSON.stringify([...statuses])}`).toBeLessThan(bound);
    // Answered, or refused as an outage (never a 500): jobs lost with Redis, or whose output was.
    for (const res of results) {
      if (res.status !== 200) expect(res.body.error, res.text).toMatchObject({ type: "service_unavailable", code: "redis_unavailable" });
    }

    await eventually(async () => ((await chat()).status === 200 ? true : undefined), 20_000);

    // Never charged twice: each answered completion has one UsageRecorded, and no completion has two.
    for (const res of results.filter((r) => r.status === 200)) expect(await completionEvents(platform.deps.pool, res.body.id)).toHaveLength(1);
    const doubled = await platform.deps.pool.query("SELECT stream_id FROM es_events WHERE event_type = 'UsageRecorded' GROUP BY stream_id HAVING count(*) > 1");
    expect(doubled.rows).toEqual([]);
    // No hold left once the sweeper ran (holds of jobs lost with Redis are released; settled ones folded).
    const sweeper = new HoldSweeper({
      pool: platform.deps.pool,
      clock: { now: () => new Date(Date.now() + 3_600_000) },
      logger: silentLogger,
      maxHoldAgeMs: 60_000,
      intervalMs: 0,
    });
    await sweeper.sweepOnce();
    const holds = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds");
    expect(holds.rows[0].n).toBe(0);
    process.stdout.write(`after the Redis restart: ${JSON.stringify(Object.fromEntries(statuses))} (status: requests)\n`);
  }, 120_000);
});
