import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Tenant, TenantPlatform, tenantChat } from "./tenantPlatform.ts";

/**
 * Waiting jobs are reranked (after 2 s, then each second) to their account's jobs ahead of them, running
 * or waiting since before them: an account whose backlog has waited long does not go ahead of another
 * account's first request (under the earlier rule, ranks halved down to the lane's first, it was queued
 * behind every job of the backlog, waited as long as the backlog, and a request answered whole timed
 * out); and two accounts that both keep a backlog share the slots. One worker with two slots.
 */
const TOKENS = 10;
const TOKEN_DELAY_MS = 30;
let platform: TenantPlatform;
let a: Tenant;
let b: Tenant;
let c: Tenant;

beforeAll(async () => {
  platform = await TenantPlatform.start({ apis: 1, workers: 1, slotsPerWorker: 2, tokens: TOKENS, tokenDelayMs: TOKEN_DELAY_MS });
  [a, b, c] = await Promise.all([platform.tenant(), platform.tenant(), platform.tenant()]);
}, 120_000);

afterAll(async () => {
  await platform?.stop();
}, 60_000);

describe("reranking waiting jobs at their account's share", () => {
  it("serves another account's first request next, after a backlog waited long enough to be reranked", async () => {
    const api = platform.apis[0]!;
    const BACKLOG = 100;
    const ended: string[] = [];
    const chat = (tenant: Tenant, name: string) =>
      tenantChat(api, tenant.key, { content: name, stream: true }).then((answer) => {
        ended.push(name);
        return answer;
      });
    // About 0.3 s a job, two at a time: the backlog takes some 16 s; under the earlier rule (ranks halved
    // each second after 2 s) its jobs of rank 99 were at rank 0 after 9 s.
    const backlog = Array.from({ length: BACKLOG }, (_, i) => chat(a, `A ${i}`));
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    const aEndedBefore = ended.length;
    expect(aEndedBefore).toBeLessThan(BACKLOG - 5);
    const first = await chat(b, "B");
    expect(first.status).toBe(200);
    // At most the jobs running when B came (two slots) and one that a worker took meanwhile end before B's.
    expect(ended.indexOf("B") - aEndedBefore).toBeLessThanOrEqual(3);
    expect((await Promise.all(backlog)).map((answer) => answer.status)).toEqual(Array(BACKLOG).fill(200));
  }, 90_000);

  it("shares the slots between two accounts that both keep a backlog, whatever their numbers of clients", async () => {
    const api = platform.apis[0]!;
    const done = { a: 0, c: 0 };
    const until = performance.now() + 16_000;
    const measureFrom = performance.now() + 5_000;
    // Closed-loop clients: A 24 of them, C 6; each job about 0.3 s, two slots: a job waits some 4.5 s,
    // long enough to be reranked.
    const client = async (tenant: Tenant, name: "a" | "c") => {
      while (performance.now() < until) {
        const answer = await tenantChat(api, tenant.key, { content: name, stream: true });
        expect(answer.status).toBe(200);
        if (answer.endedAt > measureFrom && answer.endedAt < until) done[name] += 1;
      }
    };
    await Promise.all([...Array.from({ length: 24 }, () => client(a, "a")), ...Array.from({ length: 6 }, () => client(c, "c"))]);
    // Fair: about half each (both always have more waiting than one slot); first come, first served
    // would give C about 6 in 30.
    expect(done.c / (done.a + done.c), JSON.stringify(done)).toBeGreaterThan(0.33);
  }, 90_000);
});
