import { startTestProjector } from "../support/testProjector.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import type { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";

/** An OpenAI SDK client that counts the HTTP requests it makes (to see whether it retries). */
function countingClient(platform: TestPlatform, key: string, maxRetries?: number) {
  const calls = { n: 0 };
  const client = new OpenAI({
    baseURL: `${platform.baseUrl}/v1`,
    apiKey: key,
    timeout: 60_000,
    ...(maxRetries === undefined ? {} : { maxRetries }),
    fetch: (input, init) => {
      calls.n++;
      return fetch(input, init);
    },
  });
  return { client, calls };
}

describe("budgets and usage end to end (openai SDK, queue, worker, projector)", () => {
  let platform: TestPlatform;
  let runner: ProjectionRunner;
  beforeAll(async () => {
    platform = await startTestPlatform();
    runner = startTestProjector(platform);
  });
  afterAll(async () => {
    await runner?.stop();
    await platform?.close();
  });

  it("answers 402 subscription_required without an active subscription (the SDK does not retry it)", async () => {
    const { key } = await platform.createKey({ subscription: "inactive" });
    const { client, calls } = countingClient(platform, key);
    const error = await client.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    expect((error as InstanceType<typeof OpenAI.APIError>).type).toBe("subscription_required");
    expect(calls.n).toBe(1);
  });

  it("answers 429 monthly_budget_exceeded once the budget cannot hold the request; the SDK, even with its default retries, stops at once", async () => {
    const { key, account } = await platform.createKey();
    await executeAccountCommand(platform.deps.accounts, account.accountId, {
      type: "SetSubscription",
      status: "active",
      monthlyBudgetMicroChf: 1,
      now: new Date(),
    });
    const { client, calls } = countingClient(platform, key); // default maxRetries (2)
    const error = await client.chat.completions
      .create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 50 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const apiError = error as InstanceType<typeof OpenAI.RateLimitError>;
    expect(apiError.status).toBe(429);
    expect(apiError.type).toBe("rate_limit_exceeded");
    expect(apiError.code).toBe("monthly_budget_exceeded");
    expect(apiError.message).toMatch(/resets at the start of the next billing period, on \d{4}-\d{2}-01/);
    // No smaller request of this kind fits the micro-CHF left: none is suggested.
    expect(apiError.message).not.toContain("smaller one");
    expect(apiError.headers?.get("retry-after")).toBeNull();
    expect(calls.n).toBe(1);

    // Embeddings are admitted against the same budget.
    const embedError = await client.embeddings.create({ model: TINY_EMBED, input: "some text to embed" }).catch((e: unknown) => e);
    expect((embedError as InstanceType<typeof OpenAI.APIError>).status).toBe(429);

    // Raising the budget takes effect on the next request; nothing stays held.
    await executeAccountCommand(platform.deps.accounts, account.accountId, {
      type: "SetSubscription",
      status: "active",
      monthlyBudgetMicroChf: 1_000_000,
      now: new Date(),
    });
    const reply = await client.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
    expect(reply.choices[0]!.finish_reason).toBe("length");
    const holds = await eventuallyTrue(async () => {
      const r = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      return r.rows[0].n === 0;
    });
    expect(holds).toBe(true);
  });

  it("shows a real completion's usage in the key stats, the usage API and the account view, at the recorded figures", async () => {
    const { key, keyId, account } = await platform.createKey();
    const openai = platform.openai(key);
    const reply = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, max_tokens: 5 });
    const usage = reply.usage!;
    // tiny-chat: CHF 0.5 / M input, CHF 1.5 / M output
    const cost = costMicroChf(
      { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens },
      { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 1_500_000 },
    );
    const costChf = cost / 1_000_000;

    // Two projections (per key, per account) with their own checkpoints: wait for both.
    const projected = await eventuallyTrue(async () => {
      const res = await platform.request("GET", `/api/v1/accounts/user/api-keys/${keyId}/`, { token: account.sessionToken });
      const report = await platform.request("GET", "/api/v1/accounts/user/usage?group_by=key", { token: account.sessionToken });
      return res.body?.usage?.total_requests === 1 && report.body?.total?.requests === 1;
    });
    expect(projected).toBe(true);
    const keyRes = await platform.request("GET", `/api/v1/accounts/user/api-keys/${keyId}/`, { token: account.sessionToken });
    expect(keyRes.body.usage.total_requests).toBe(1);
    expect(keyRes.body.usage.total_cost_chf).toBe(costChf);
    expect(keyRes.body.usage.last_30_days.at(-1)).toMatchObject({ requests: 1, cost_chf: costChf });

    const byKey = await platform.request("GET", "/api/v1/accounts/user/usage?group_by=key", { token: account.sessionToken });
    expect(byKey.status, byKey.text).toBe(200);
    expect(byKey.body.data).toEqual([
      expect.objectContaining({
        key_id: keyId,
        requests: 1,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        cost_chf: costChf,
      }),
    ]);
    expect(byKey.body.period).toMatchObject({ budget_chf: 100, spent_chf: costChf, held_chf: 0 });

    const me = await platform.request("GET", "/api/v1/accounts/user", { token: account.sessionToken });
    expect(me.body.current_period).toMatchObject({ spent_chf: costChf, held_chf: 0 });
  });
});
