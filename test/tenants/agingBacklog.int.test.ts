import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Tenant, TenantPlatform, tenantChat } from "./tenantPlatform.ts";

/**
 * Waiting jobs age (their rank halved each second after 2 s), but no further than the rank of their
 * account's jobs running now: an account whose backlog has waited long does not go ahead of another
 * account's first request (which, queued behind every job of the backlog that aged to the lane's first
 * rank, would wait as long as the backlog, and a request answered whole would time out). One worker,
 * one slot: the order in which the jobs end is the order in which they started.
 */
const TOKENS = 10;
const TOKEN_DELAY_MS = 30;
let platform: TenantPlatform;
let a: Tenant;
let b: Tenant;

beforeAll(async () => {
  platform = await TenantPlatform.start({ apis: 1, workers: 1, slotsPerWorker: 1, tokens: TOKENS, tokenDelayMs: TOKEN_DELAY_MS });
  [a, b] = await Promise.all([platform.tenant(), platform.tenant()]);
}, 120_000);

afterAll(async () => {
  await platform?.stop();
}, 60_000);

describe("aging stops at the account's share", () => {
  it("serves another account's first request next, after a backlog waited long enough to age to the first rank", async () => {
    const api = platform.apis[0]!;
    const BACKLOG = 40;
    const ended: string[] = [];
    const chat = (tenant: Tenant, name: string) =>
      tenantChat(api, tenant.key, { content: name, stream: true }).then((answer) => {
        ended.push(name);
        return answer;
      });
    // About 0.3 s a job: the backlog takes some 12 s; its jobs of rank 39 are at rank 0 after 7 s of halving.
    const backlog = Array.from({ length: BACKLOG }, (_, i) => chat(a, `A ${i}`));
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    const aEndedBefore = ended.length;
    expect(aEndedBefore).toBeLessThan(BACKLOG - 5);
    const first = await chat(b, "B");
    expect(first.status).toBe(200);
    // At most the job running when B came and one that a worker took meanwhile end before B's.
    expect(ended.indexOf("B") - aEndedBefore).toBeLessThanOrEqual(2);
    expect((await Promise.all(backlog)).map((answer) => answer.status)).toEqual(Array(BACKLOG).fill(200));
  }, 90_000);
});
