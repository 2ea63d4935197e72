import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Usage } from "../../src/contracts/deltaMessage.ts";
import { jobPriority } from "../../src/contracts/lanes.ts";
import type { TenantLimits } from "../../src/contracts/tenantCounters.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { CompletionWorker } from "../../workers/completion/completionWorker.ts";
import { eventually } from "../support/eventually.ts";
import { useTenantQueueRig } from "./tenantQueueRig.ts";

/**
 * The tokens a request counts at admission (prompt bound + max_tokens) and does not use go back to their
 * rate window once, at the job's end, with the one release its worker sends (the job carries what was
 * counted); a job released twice (the API gave up on it and released it, its worker ran it after all)
 * gives them back once.
 */
const TOKENS_PER_MINUTE = 10_000;
const LIMITS: TenantLimits = {
  account: { requestsPerMinute: 1e9, tokensPerMinute: TOKENS_PER_MINUTE, concurrentRequests: 1e6 },
  key: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e6 },
  queueShare: 1e6,
};
const USED: Usage = { promptTokens: 20, completionTokens: 10, reasoningTokens: 0 };

const rig = useTenantQueueRig();

/** Admits a job counting `tokens`; returns the job (carrying what was counted) and the tokens remaining after it. */
async function admit(model: string, account: string, tokens: number): Promise<{ job: CompletionJob; remaining: number }> {
  const completionId = `refund-${randomUUID()}`;
  const admitted = await rig.counters.admit({
    completionId,
    accountId: account,
    keyId: `${account}-key`,
    model,
    tokens,
    countsAsRequest: true,
    limits: LIMITS,
    waitTtlMs: 60_000,
    runTtlMs: 60_000,
  });
  expect(admitted.refused).toBeNull();
  const job: CompletionJob = {
    completionId,
    endpoint: "chat.completions",
    model,
    accountId: account,
    keyId: `${account}-key`,
    created: 1_700_000_000,
    replyTo: rig.keys.replyChannel("refund-test"),
    lane: "interactive",
    priority: jobPriority("interactive", admitted.rank),
    countedTokens: { window: admitted.window, tokens },
    work: { kind: "embeddings", input: ["x"] },
  };
  return { job, remaining: admitted.tokens.remaining };
}

/** The account's tokens remaining now (a probe admission counting none). */
async function remaining(model: string, account: string): Promise<number> {
  return (await admit(model, account, 0)).remaining;
}

function startWorker(model: string, ran: string[]): CompletionWorker {
  return new CompletionWorker({
    modelId: model,
    redis: rig.workerRedis,
    keys: rig.keys,
    concurrency: 1,
    runner: {
      async run(job: CompletionJob): Promise<Usage> {
        ran.push(job.completionId);
        return USED;
      },
    },
    logger: silentLogger,
    tenants: { counters: rig.counters, inFlightTtlMs: 60_000 },
  });
}

describe("tokens counted at admission and not used", () => {
  it("go back to their window with the worker's release at the job's end", async () => {
    const model = `refund-${randomUUID().slice(0, 8)}`;
    const account = `acct-${randomUUID().slice(0, 8)}`;
    const { job, remaining: afterAdmission } = await admit(model, account, 500);
    expect(afterAdmission).toBe(TOKENS_PER_MINUTE - 500);
    const ran: string[] = [];
    const worker = startWorker(model, ran);
    await worker.start();
    try {
      await rig.queues.enqueue(job);
      // Only the 30 tokens the job used stay counted.
      await eventually(
        async () => ((await remaining(model, account)) === TOKENS_PER_MINUTE - USED.promptTokens - USED.completionTokens ? true : undefined),
        10_000,
      );
      expect(ran).toEqual([job.completionId]);
    } finally {
      await worker.close();
    }
  });

  it("go back once when the API released the job before its worker ran it", async () => {
    const model = `refund-${randomUUID().slice(0, 8)}`;
    const account = `acct-${randomUUID().slice(0, 8)}`;
    // Another request's tokens stay counted (so that a second give-back would show, not stop at zero).
    await admit(model, account, 1000);
    const { job } = await admit(model, account, 500);
    // The API gave up on the job (e.g. it left it queued for later): it released it, giving back all it counted.
    await rig.counters.release(job, job.countedTokens);
    expect(await remaining(model, account)).toBe(TOKENS_PER_MINUTE - 1000);
    const ran: string[] = [];
    const worker = startWorker(model, ran);
    await worker.start();
    try {
      await rig.queues.enqueue(job);
      await eventually(async () => (ran.length === 1 ? true : undefined), 10_000);
      // The worker's release at its end finds the job released already: nothing more is given back.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await remaining(model, account)).toBe(TOKENS_PER_MINUTE - 1000);
    } finally {
      await worker.close();
    }
  });
});
