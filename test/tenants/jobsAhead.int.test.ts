import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { TenantJob, TenantLimits } from "../../src/contracts/tenantCounters.ts";
import { useTenantQueueRig } from "./tenantQueueRig.ts";

/**
 * How far a waiting job ages: its account's jobs of the model ahead of it, running or waiting since
 * before it (TenantCounters.ahead), so that a backlog's jobs do not all age to the lane's first rank in
 * the moment between one of its jobs ending and the next starting.
 */
const LIMITS: TenantLimits = {
  account: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e6 },
  key: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e6 },
  queueShare: 1e6,
};

const rig = useTenantQueueRig();

async function admit(account: string, model: string): Promise<TenantJob> {
  const job: TenantJob = { completionId: `ahead-${randomUUID()}`, accountId: account, keyId: `${account}-key`, model };
  const admitted = await rig.counters.admit({ ...job, tokens: 1, countsAsRequest: true, limits: LIMITS, waitTtlMs: 60_000, runTtlMs: 60_000 });
  expect(admitted.refused).toBeNull();
  // Entries scored by their expiry: one millisecond apart keeps their order.
  await new Promise((resolve) => setTimeout(resolve, 2));
  return job;
}

describe("the jobs ahead of a waiting job", () => {
  it("counts its account's running jobs and those waiting since before it, of its model only; null once it started", async () => {
    const account = randomUUID();
    const [first, second, third, fourth] = [await admit(account, "m"), await admit(account, "m"), await admit(account, "m"), await admit(account, "m")];
    await admit(account, "other-model");
    await admit(randomUUID(), "m");
    expect(await Promise.all([first, second, third, fourth].map((job) => rig.counters.ahead(job)))).toEqual([0, 1, 2, 3]);
    // The first starts: it waits no more, and still counts for the others (running).
    await rig.counters.started(first!, 60_000);
    expect(await rig.counters.ahead(first!)).toBeNull();
    expect(await rig.counters.ahead(third!)).toBe(2);
    // It ends: the moment before the next one starts, the others still keep their order (no collapse to 0).
    await rig.counters.release(first!);
    expect(await Promise.all([second, third, fourth].map((job) => rig.counters.ahead(job)))).toEqual([0, 1, 2]);
  });
});
