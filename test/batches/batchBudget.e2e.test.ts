import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { batchCharges, readJsonl, uploadBatchFile, waitForStatus } from "./batchSteps.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";

/**
 * A batch line's budget hold is its worst case at the batch price it is charged at: an account whose
 * budget is below a request's worst case at the full price but above it at the batch price has the
 * request refused interactively (429 monthly_budget_exceeded) and runs it as a batch line.
 */
describe("a batch line's budget hold", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({ env: { BATCH_POLL_MS: "50" } });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("is held at the batch price: a line the budget fits only at that price runs", async () => {
    // max_tokens 1000 at CHF 1.50 per million output tokens: a worst case of about 1,500 µCHF at the
    // full price, about 750 at half price; the budget, 1,000 µCHF, is in between.
    const account = await createTestAccount(platform.deps.pool, { monthlyBudgetChf: 0.001 });
    const created = await platform.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: "batch" } });
    expect(created.status).toBe(201);
    const openai = new OpenAI({ baseURL: `${platform.baseUrl}/v1`, apiKey: created.body.key as string, maxRetries: 0 });
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Say hello" }], max_tokens: 1000, temperature: 0 };

    const interactive = await openai.chat.completions.create(body).catch((error: unknown) => error);
    expect(interactive).toBeInstanceOf(OpenAI.APIError);
    expect((interactive as InstanceType<typeof OpenAI.APIError>).status).toBe(429);
    expect((interactive as InstanceType<typeof OpenAI.APIError>).code).toBe("monthly_budget_exceeded");

    const batch = await openai.batches.create({
      input_file_id: await uploadBatchFile(openai, [{ custom_id: "line-0", method: "POST", url: "/v1/chat/completions", body }]),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    const done = await waitForStatus(openai, batch.id, ["completed", "failed", "expired"], 60_000);
    expect(done.request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    const [line] = await readJsonl(openai, done.output_file_id!);
    expect(line.response.status_code).toBe(200);
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    expect(charges.get(`completion-${line.response.request_id}`)).toHaveLength(1);
  }, 120_000);

  it("waits while the batch's own lines hold the budget, and fails a line only for a budget that is spent", async () => {
    // Each line holds about 750 µCHF (its worst case at the batch price) of a 1,000 µCHF budget and costs a
    // few µCHF: run at once, the lines' holds leave the others too little, though the budget is far from spent.
    const account = await createTestAccount(platform.deps.pool, { monthlyBudgetChf: 0.001 });
    const created = await platform.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: "batch" } });
    const openai = new OpenAI({ baseURL: `${platform.baseUrl}/v1`, apiKey: created.body.key as string, maxRetries: 0 });
    const lines = Array.from({ length: 5 }, (_, i) => ({
      custom_id: `line-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: TINY_CHAT, messages: [{ role: "user" as const, content: `Say hello ${i}` }], max_tokens: 1000, temperature: 0 },
    }));
    const batch = await openai.batches.create({
      input_file_id: await uploadBatchFile(openai, lines),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    const done = await waitForStatus(openai, batch.id, ["completed", "failed", "expired"], 90_000);
    expect(done.error_file_id ? await readJsonl(openai, done.error_file_id) : []).toEqual([]);
    expect(done.request_counts).toEqual({ total: 5, completed: 5, failed: 0 });
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    expect(charges.size).toBe(5);
    for (const events of charges.values()) expect(events).toHaveLength(1);
  }, 120_000);
});
