import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { jobPriority } from "../../src/contracts/lanes.ts";
import { type Tenant, TENANT_MODEL, TenantPlatform, tenantChat } from "./tenantPlatform.ts";

/**
 * Fair share inside a model's queue, on two API processes and two worker processes (one slot each:
 * two slots in all), each job ~300 ms. Account A queues a backlog of many jobs through both APIs;
 * account B's request, sent once A's backlog is queued, starts within about one job: it finishes while
 * most of A's backlog still waits (with one FIFO queue it would finish after all of it).
 * Then an account's share of the queue: with QUEUE_MAX_WAITING 36 and QUEUE_ACCOUNT_SHARE 0.5, it may have 18
 * jobs waiting; its excess is refused at once (429 queue_share, Retry-After, x-should-retry: true)
 * while B is served.
 */
const TOKENS = 10;
const TOKEN_DELAY_MS = 30;
let platform: TenantPlatform;
let a: Tenant;
let b: Tenant;
let c: Tenant;

beforeAll(async () => {
  platform = await TenantPlatform.start({
    apis: 2,
    workers: 2,
    slotsPerWorker: 1,
    tokens: TOKENS,
    tokenDelayMs: TOKEN_DELAY_MS,
    // The test reads each API process's /metrics on its own port.
    env: { QUEUE_MAX_WAITING: "36", QUEUE_ACCOUNT_SHARE: "0.5", METRICS_ON_API_PORT: "true" },
  });
  [a, b, c] = await Promise.all([platform.tenant(), platform.tenant(), platform.tenant()]);
}, 120_000);

afterAll(async () => {
  await platform?.stop();
}, 60_000);

describe("fair share across accounts (two API processes, two workers)", () => {
  it("starts another account's request within about one job while one account has a backlog", async () => {
    const BACKLOG = 16;
    const aDone: number[] = [];
    const flood = Array.from({ length: BACKLOG }, (_, i) =>
      tenantChat(platform.apis[i % 2]!, a.key, { content: `A ${i}` }).then((r) => {
        aDone.push(r.endedAt);
        return r;
      }),
    );
    // A's backlog is queued (its first jobs are running) before B asks.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const bSent = performance.now();
    const bAnswer = await tenantChat(platform.apis[1]!, b.key, { content: "B" });
    expect(bAnswer.status).toBe(200);
    const aBeforeB = aDone.filter((t) => t <= bAnswer.endedAt).length;
    const aAnswers = await Promise.all(flood);
    expect(aAnswers.map((r) => r.status)).toEqual(Array(BACKLOG).fill(200));
    // B waited for at most the jobs running when it came (two slots) and about one more each: far
    // fewer than A's backlog. (FIFO: all 16 of A's would end first.)
    expect(aBeforeB).toBeLessThanOrEqual(6);
    expect(aBeforeB).toBeLessThan(BACKLOG - 6);
    // And A's backlog was still being served after B: the pool stayed busy with A's work (work-conserving).
    expect(Math.max(...aDone)).toBeGreaterThan(bAnswer.endedAt);
    expect(bAnswer.endedAt - bSent).toBeLessThan(3_000);
  }, 60_000);

  it("lets a batch-lane backlog delay an interactive request by about one job", async () => {
    // 30 batch-lane jobs of C queued at once (as the Batch API will queue its lines), then B asks.
    const keys = new InferenceKeys(platform.redis.prefix);
    const queues = new CompletionQueues(platform.redis.redis, keys);
    const keyId = (await platform.db.pool.query<{ key_id: string }>("SELECT key_id FROM rm_keys WHERE account_id = $1", [c.accountId])).rows[0]!.key_id;
    const BATCH = 30;
    try {
      for (let i = 0; i < BATCH; i++) {
        const job: CompletionJob = {
          completionId: `chatcmpl-batchline${i}x${Date.now().toString(36)}`,
          endpoint: "chat.completions",
          model: TENANT_MODEL,
          accountId: c.accountId,
          keyId,
          created: Math.floor(Date.now() / 1000),
          replyTo: keys.replyChannel("nobody"),
          lane: "batch",
          priority: jobPriority("batch", i),
          work: {
            kind: "chat",
            request: { messages: [{ role: "user", content: "Batch line." }], maxTokens: 50, temperature: 1, topP: 1, presencePenalty: 0, frequencyPenalty: 0 },
          },
        };
        await queues.enqueue(job);
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      const bAnswer = await tenantChat(platform.apis[0]!, b.key, { content: "B during the batch" });
      expect(bAnswer.status).toBe(200);
      const stillWaiting = await queues.waitingCount(TENANT_MODEL);
      // B waited for the two batch jobs running and at most about one more each; most of the backlog waits on.
      expect(stillWaiting).toBeGreaterThanOrEqual(BATCH - 10);
      // The backlog drains afterwards (the lower lane gets every slot nobody else wants).
      await expect.poll(() => queues.waitingCount(TENANT_MODEL), { timeout: 30_000, interval: 250 }).toBe(0);
    } finally {
      await queues.close();
    }
  }, 60_000);

  it("refuses an account's excess over its share of the queue (429 queue_share) while another account is served", async () => {
    // QUEUE_MAX_WAITING 36 x QUEUE_ACCOUNT_SHARE 0.5: 18 of C's jobs may wait; 2 run.
    const REQUESTS = 34;
    const answers = Promise.all(Array.from({ length: REQUESTS }, (_, i) => tenantChat(platform.apis[i % 2]!, c.key, { content: `C ${i}` })));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const bAnswer = await tenantChat(platform.apis[0]!, b.key, { content: "B again" });
    expect(bAnswer.status).toBe(200);
    const cAnswers = await answers;
    const refused = cAnswers.filter((r) => r.status === 429);
    const served = cAnswers.filter((r) => r.status === 200);
    expect(refused.length + served.length).toBe(REQUESTS);
    expect(refused.length).toBeGreaterThan(0);
    expect(served.length).toBeGreaterThanOrEqual(18);
    for (const r of refused) {
      expect(r.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "queue_share" });
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(r.headers.get("x-should-retry")).toBe("true");
    }
    // The refusals are counted by reason on /metrics.
    const metrics = await (await fetch(`${platform.apis[0]}/metrics`)).text();
    const metrics2 = await (await fetch(`${platform.apis[1]}/metrics`)).text();
    const count = (text: string) => Number(/inference_admission_refusals_total\{reason="queue_share"\} (\d+)/.exec(text)?.[1] ?? 0);
    expect(count(metrics) + count(metrics2)).toBe(refused.length);
    expect(metrics).toMatch(/inference_queue_waiting_jobs\{model="counting-model",lane="interactive"\} \d+/);
  }, 60_000);

  it("refuses for good a multi-prompt completion with more prompts than the account's share of the queue", async () => {
    // Its own prompts, queued together, filled the share: a 429 queue_share "Retry" that could never pass,
    // whose message spoke of requests the account already had waiting (it had none).
    const idle = await platform.tenant();
    const send = (prompts: number) =>
      fetch(`${platform.apis[0]!}/v1/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${idle.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TENANT_MODEL, prompt: Array.from({ length: prompts }, (_, i) => `P ${i}`), max_tokens: 2 }),
      });
    const tooMany = await send(19);
    expect(tooMany.status).toBe(429);
    expect(tooMany.headers.get("x-should-retry")).toBe("false");
    expect(tooMany.headers.get("retry-after")).toBeNull();
    const error = ((await tooMany.json()) as { error: { code: string; message: string } }).error;
    expect(error).toMatchObject({ code: "queue_share", message: expect.stringContaining("19 prompts") });
    // Two fit (the share is 18 waiting).
    const fits = await send(2);
    expect(fits.status).toBe(200);
  }, 60_000);
});
