import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Tenant, TenantPlatform, tenantChat } from "./tenantPlatform.ts";

/**
 * One account's jobs keep their order among themselves. A job's fair-share rank is its account's jobs in
 * flight on the model; once some of them end, that count drops below the ranks of the account's jobs
 * still waiting, and a job queued then must not overtake them (each overtaking job pushes an earlier one
 * further back: a long enough run starves it into its start timeout). One worker, one slot: the order in
 * which the jobs end is the order in which they started.
 */
const TOKENS = 10;
const TOKEN_DELAY_MS = 30;
let platform: TenantPlatform;
let a: Tenant;
let c: Tenant;

beforeAll(async () => {
  platform = await TenantPlatform.start({ apis: 1, workers: 1, slotsPerWorker: 1, tokens: TOKENS, tokenDelayMs: TOKEN_DELAY_MS });
  [a, c] = await Promise.all([platform.tenant(), platform.tenant()]);
}, 120_000);

afterAll(async () => {
  await platform?.stop();
}, 60_000);

describe("one account's jobs in order", () => {
  it("serves a job queued after some of the account's jobs ended behind the account's jobs still waiting", async () => {
    const api = platform.apis[0]!;
    const BURST = 6;
    const ended: string[] = [];
    const chat = (name: string) =>
      tenantChat(api, a.key, { content: name }).then((r) => {
        ended.push(name);
        return r;
      });
    // Queued one after the other: ranks 0..5 (the first runs at once, the rest wait).
    const burst: Promise<{ status: number }>[] = [];
    for (let i = 0; i < BURST; i++) {
      burst.push(chat(`burst ${i}`));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Two of them have ended: four are in flight, the last of them waiting at rank 5.
    await expect.poll(() => ended.length, { timeout: 10_000, interval: 10 }).toBeGreaterThanOrEqual(2);
    const late = await chat("late");
    expect(late.status).toBe(200);
    expect((await Promise.all(burst)).map((r) => r.status)).toEqual(Array(BURST).fill(200));
    // The late job ends after every job of the burst (with rank 4 it would have gone before "burst 5").
    expect(ended.indexOf("late")).toBe(BURST);
  }, 60_000);
});

describe("reranking: an account with more jobs in flight than another is not starved by it", () => {
  it("starts every job of a backlog while another account keeps the only slot busy with fresh jobs of lower rank", async () => {
    const api = platform.apis[0]!;
    // A queues 6 streamed jobs at once (ranks 0..5); C keeps 3 clients going (its jobs rank 0..2, always
    // two of them waiting for the one slot). A's jobs of rank 3 and more rank behind every new job of C:
    // without reranking they would wait until C stops.
    const cUntil = performance.now() + 12_000;
    let cStopped = 0;
    const cClient = async () => {
      while (performance.now() < cUntil) {
        const answer = await tenantChat(api, c.key, { content: "C", stream: true });
        expect(answer.status).toBe(200);
      }
      cStopped = performance.now();
    };
    const cClients = Promise.all([cClient(), cClient(), cClient()]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const backlog = await Promise.all(Array.from({ length: 6 }, (_, i) => tenantChat(api, a.key, { content: `A ${i}`, stream: true })));
    const aLastEnded = Math.max(...backlog.map((answer) => answer.endedAt));
    expect(backlog.map((answer) => answer.status)).toEqual(Array(6).fill(200));
    await cClients;
    // Every job of A's backlog ended while C still kept the slot busy.
    expect(aLastEnded).toBeLessThan(cStopped);
  }, 60_000);
});
