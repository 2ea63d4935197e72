import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSse } from "./inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { MAX_PROMPTS } from "../../src/api/inference/endpoints/completions/completionParameters.ts";
import { completionRecordCount } from "../support/completionRecordCount.ts";
import { openHolds, setBudget } from "../usage/usageFixtures.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { releaseHold } from "../../src/ledger/budget/releaseHold.ts";

describe("text completions with several prompts (real HTTP API, tiny model)", () => {
  let platform: TestPlatform;
  let key: string;
  let keyId: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    ({ key, keyId } = await platform.createKey());
  });
  afterAll(async () => {
    await platform?.close();
  });

  const complete = (body: Record<string, unknown>) =>
    platform.request("POST", "/v1/completions", { token: key, body: { model: TINY_CHAT, max_tokens: 6, temperature: 0, ...body } });

  it("answers one choice per prompt, indexed by prompt, with the usage summed and each prompt charged once", async () => {
    const prompts = ["Hello there", "Once upon a time", "The weather"];
    const singles = await Promise.all(prompts.map((prompt) => complete({ prompt })));
    const before = await usageEventCount();
    const multi = await complete({ prompt: prompts });
    expect(multi.status, multi.text).toBe(200);
    expect(multi.body.object).toBe("text_completion");
    expect(multi.body.choices).toHaveLength(3);
    multi.body.choices.forEach((choice: { index: number; text: string; logprobs: unknown }, index: number) => {
      expect(choice.index).toBe(index);
      expect(choice.text).toBe(singles[index]!.body.choices[0].text);
      expect(choice.logprobs).toBeNull();
    });
    const sum = (field: string) => singles.reduce((total, single) => total + (single.body.usage[field] as number), 0);
    expect(multi.body.usage).toEqual({ prompt_tokens: sum("prompt_tokens"), completion_tokens: sum("completion_tokens"), total_tokens: sum("total_tokens") });
    expect(multi.headers.get("x-completion-id")).toBe(multi.body.id);
    expect((await usageEventCount()) - before).toBe(3);
  });

  it("fails as a whole when one prompt fails: the others stopped uncharged, no hold left, a prompt already answered named in the error", async () => {
    const other = await platform.createKey();
    const response = await platform.request("POST", "/v1/completions", {
      token: other.key,
      // Under the API's character bound (8 per context token), over the model's context in tokens: the engine
      // refuses it at once, while the first prompt is still generating its 200 tokens.
      body: { model: TINY_CHAT, max_tokens: 200, prompt: ["Hello there", "a ".repeat(1500)] },
    });
    expect(response.status).toBe(400);
    expect(response.body.error.type).toBe("invalid_request_error");
    // Told in the endpoint's words: its prompt, not the engine's chat messages; sentences end before the next.
    expect(response.body.error).toMatchObject({ param: "prompt", code: "context_length_exceeded" });
    expect(response.body.error.message).toMatch(/your prompt resulted in \d+ tokens/);
    expect(response.body.error.message).not.toMatch(/messages|[^.] The prompts answered/);
    const budget = await eventually(async () => {
      const row = await platform.deps.pool.query("SELECT coalesce(sum(held_micro_chf), 0)::int AS held FROM rm_budget WHERE account_id = $1", [
        other.account.accountId,
      ]);
      return row.rows[0].held === 0 ? row.rows[0] : undefined;
    });
    expect(budget.held).toBe(0);
    // Give a stopped job the time to have recorded something, were it to.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const records = await platform.deps.pool.query<{ completion_id: string; outcome: string; cost: number }>(
      "SELECT data->>'completionId' AS completion_id, data->>'outcome' AS outcome, (data->>'costMicroChf')::int AS cost FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'keyId' = $1",
      [other.keyId],
    );
    // The refused prompt's record (nothing generated, nothing charged); the other prompt was stopped, not
    // charged, unless it had finished first: then the error names it (its reply is there to read).
    expect(records.rows.filter((row) => row.outcome === "failed").map((row) => row.cost)).toEqual([0]);
    expect(records.rows.filter((row) => row.outcome === "cancelled")).toEqual([]);
    for (const row of records.rows.filter((r) => r.outcome === "finished" || r.outcome === "length")) {
      expect(response.body.error.message).toContain(row.completion_id);
    }
  });

  it("refuses a prompt over the length bound before any prompt starts: 400, nothing held, nothing charged", async () => {
    const other = await platform.createKey();
    const response = await platform.request("POST", "/v1/completions", {
      token: other.key,
      body: { model: TINY_CHAT, max_tokens: 200, prompt: ["Hello there", "word ".repeat(3000)] },
    });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe("context_length_exceeded");
    const held = await platform.deps.pool.query("SELECT coalesce(sum(held_micro_chf), 0)::int AS held FROM rm_budget WHERE account_id = $1", [
      other.account.accountId,
    ]);
    expect(held.rows[0].held).toBe(0);
    const charged = await platform.deps.pool.query("SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'keyId' = $1", [
      other.keyId,
    ]);
    expect(charged.rows[0].n).toBe(0);
  });

  it("takes 20 prompts at once (LangChain's default batch of its OpenAI LLM), with no leak warning on stderr", async () => {
    expect(MAX_PROMPTS).toBeGreaterThanOrEqual(20);
    // Node's MaxListenersExceededWarning: a plain-text line outside the JSON log (a listener per prompt).
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const response = await complete({ prompt: Array.from({ length: 20 }, (_, i) => `Prompt ${i}`), max_tokens: 1 });
      expect(response.status, response.text).toBe(200);
      expect(response.body.choices.map((choice: { index: number }) => choice.index)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings).not.toContain("MaxListenersExceededWarning");
  });

  it("still streams a single prompt given as an array of one", async () => {
    const response = await complete({ prompt: ["Hello there"], stream: true });
    expect(response.status).toBe(200);
    expect(parseSse(response.text).at(-1)!.data).toBe("[DONE]");
  });

  it("refused by the budget at any prompt: a 429 that names no completion, and no record left of the prompts that had started", async () => {
    const poor = await platform.createKey();
    await setBudget(platform.deps.pool, poor.account.accountId, 1);
    const records = () => completionRecordCount(platform.testRedis.redis, platform.testRedis.prefix);
    const before = await records();
    const refused = await platform.request("POST", "/v1/completions", {
      token: poor.key,
      body: { model: TINY_CHAT, prompt: ["It is a truth 0", "It is a truth 1", "It is a truth 2", "It is a truth 3", "It is a truth 4"], max_tokens: 60 },
    });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("monthly_budget_exceeded");
    expect(refused.headers.get("x-completion-id")).toBeNull();
    expect(await records()).toBe(before);
    expect(await openHolds(platform.deps.pool, poor.account.accountId)).toBe(0);

    // A budget that fits two prompts' holds, not five: the prompts' own holds are in the way, so the 429 is
    // final (no "retry": retrying cannot help), and says so in the request's terms.
    // Refused whole (every prompt's hold is placed before any starts): its message counts the five together.
    expect(refused.body.error.message).toContain("(its prompts together)");
    const onePrompt = (Number(/may cost up to CHF ([0-9.]+)/.exec(refused.body.error.message)![1]) * 1_000_000) / 5;
    await setBudget(platform.deps.pool, poor.account.accountId, Math.round(onePrompt * 2.5));
    const ownInTheWay = await platform.request("POST", "/v1/completions", {
      token: poor.key,
      body: { model: TINY_CHAT, prompt: ["It is a truth 0", "It is a truth 1", "It is a truth 2", "It is a truth 3", "It is a truth 4"], max_tokens: 60 },
    });
    expect(ownInTheWay.status).toBe(429);
    expect(ownInTheWay.headers.get("x-should-retry")).toBe("false");
    expect(ownInTheWay.headers.get("retry-after")).toBeNull();
    expect(ownInTheWay.body.error.message).toMatch(/^Monthly budget exceeded: this request may cost up to CHF [0-9.]+ \(its prompts together\)/);
    expect(ownInTheWay.body.error.message).not.toContain("held by requests in progress");
    expect(await openHolds(platform.deps.pool, poor.account.accountId)).toBe(0);
  });

  it("while other requests hold the budget, starts none of its prompts: a 429 'in use' naming only their holds, then runs once they end", async () => {
    const held = await platform.createKey();
    const prompts = ["It is a truth 0", "It is a truth 1", "It is a truth 2"];
    const body = { model: TINY_CHAT, prompt: prompts, max_tokens: 20, temperature: 0 };
    // The request's own worst case, read from a refusal on a budget of 1 µCHF.
    await setBudget(platform.deps.pool, held.account.accountId, 1);
    const probe = await platform.request("POST", "/v1/completions", { token: held.key, body });
    const whole = Math.round(Number(/may cost up to CHF ([0-9.]+)/.exec(probe.body.error.message)![1]) * 1_000_000);
    // Room for the whole request, not while another request in progress holds 2/3 of it.
    await setBudget(platform.deps.pool, held.account.accountId, whole + 10);
    const other = `cmpl-other-${Date.now()}`;
    expect(
      (await placeHold(platform.deps.pool, { holdId: other, accountId: held.account.accountId, amountMicroChf: Math.ceil((whole * 2) / 3), now: new Date() }))
        .ok,
    ).toBe(true);
    const before = await completionRecordCount(platform.testRedis.redis, platform.testRedis.prefix);
    const refused = await platform.request("POST", "/v1/completions", { token: held.key, body });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("x-should-retry")).toBe("true");
    expect(refused.headers.get("retry-after")).not.toBeNull();
    expect(refused.body.error.message).toMatch(/^Monthly budget in use: this request may cost up to CHF [0-9.]+ \(its prompts together\)/);
    expect(refused.body.error.message).toContain(`CHF ${Math.ceil((whole * 2) / 3) / 1_000_000} held by requests in progress`);
    // None of its prompts started: no completion record, no hold of its own left, nothing charged.
    expect(await completionRecordCount(platform.testRedis.redis, platform.testRedis.prefix)).toBe(before);
    expect(await openHolds(platform.deps.pool, held.account.accountId)).toBe(1);
    const charges = await platform.deps.pool.query("SELECT 1 FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'keyId' = $1", [held.keyId]);
    expect(charges.rowCount).toBe(0);
    // The other request ends: the retry runs.
    await releaseHold(platform.deps.pool, other);
    const retried = await platform.request("POST", "/v1/completions", { token: held.key, body });
    expect(retried.status).toBe(200);
    expect(retried.body.choices).toHaveLength(3);
  });

  it("admits one of several requests sent at once when the budget fits one whole (their holds placed one by one, each took part of it and all were refused)", async () => {
    const tight = await platform.createKey();
    const prompts = Array.from({ length: 10 }, (_, i) => `It is a truth ${i}`);
    const body = { model: TINY_CHAT, prompt: prompts, max_tokens: 20, temperature: 0 };
    await setBudget(platform.deps.pool, tight.account.accountId, 1);
    const probe = await platform.request("POST", "/v1/completions", { token: tight.key, body });
    const whole = Math.round(Number(/may cost up to CHF ([0-9.]+)/.exec(probe.body.error.message)![1]) * 1_000_000);
    // Room for one request whole (and a half): five at once.
    await setBudget(platform.deps.pool, tight.account.accountId, Math.round(whole * 1.5));
    const answers = await Promise.all(Array.from({ length: 5 }, () => platform.request("POST", "/v1/completions", { token: tight.key, body })));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 429)).toHaveLength(4);
    expect(await eventually(async () => ((await openHolds(platform.deps.pool, tight.account.accountId)) === 0 ? true : undefined), 10_000)).toBe(true);
  });

  it.each([
    [{ prompt: ["a", "b"], stream: true }, "prompt"],
    [{ prompt: [] }, "prompt"],
    [{ prompt: Array.from({ length: MAX_PROMPTS + 1 }, () => "x") }, "prompt"],
  ])("refuses %j with a 400 naming %s", async (body, param) => {
    const response = await complete(body);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param });
  });

  async function usageEventCount(): Promise<number> {
    const rows = await platform.deps.pool.query("SELECT 1 FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'keyId' = $1", [keyId]);
    return rows.rowCount ?? 0;
  }
});
