import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { readPriceVersions } from "../../src/ledger/pricing/priceTable.ts";
import { createKey } from "../keys/keySteps.ts";
import { eventually } from "../support/eventually.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { countingModel, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { requestVia } from "./processChat.ts";
import { listModelIds, type RoleFixture, roleEnv, spawnRoles, startApiRole, startRoleFixture } from "./roleProcesses.ts";

/**
 * A deploy that gave a worker a registry with other prices than its API process's (roles apart): the API
 * held each request's budget at its prices (and showed them in GET /v1/models), the worker charged its
 * own, ten times higher: an account was charged twice its budget (a probe). A job now carries the prices
 * it was held at, and is charged at them, under the API's published version.
 */
const MODEL = "counting-model";
const BUDGET_CHF = 0.001;

let fixture: RoleFixture;
let upstream: CountingUpstream;
let api: string;

beforeAll(async () => {
  fixture = await startRoleFixture("price-skew");
  const { dir, db, redis, logs, children } = fixture;
  upstream = await startCountingUpstream({ totalTokens: 20, tokenDelayMs: 5, promptTokens: 10 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 16 });
  const env = await roleEnv({ dir, databaseUrl: db.url, redisUrl: redis.url, prefix: `test-price-skew-${process.pid}`, models: [model] });
  api = (await startApiRole(env, logs, children)).api;
  // The worker's registry: the same label, prices ten times the API's (1 and 2 CHF per million).
  const workerRegistry = path.join(dir, "worker-registry.json");
  const tenfold = { ...model, pricing: { input_per_million_chf: 10, output_per_million_chf: 20 } };
  await writeFile(workerRegistry, JSON.stringify({ price_table_version: "test-1", models: [tenfold] }));
  children.push(spawnRoles(["worker"], { ...env, MODELS_CONFIG: workerRegistry }, logs));
}, 120_000);

afterAll(async () => {
  await fixture?.stop();
  await upstream?.close();
}, 60_000);

describe("a worker whose registry has other prices than its API process's", () => {
  it("charges each request at the prices its hold was placed at (the API's, published): the budget is never passed", async () => {
    const { db, logs } = fixture;
    const account = await createTestAccount(db.pool, { monthlyBudgetChf: BUDGET_CHF });
    const { key } = await createKey({ request: requestVia(api) } as Parameters<typeof createKey>[0], account.sessionToken);
    await eventually(async () => ((await listModelIds(api, key)).includes(MODEL) ? true : undefined), 60_000).catch((error: unknown) => {
      throw new Error(`the worker did not start: ${logs.join("")}`, { cause: error });
    });
    const shown = (await (await fetch(`${api}/v1/models/${MODEL}`, { headers: { authorization: `Bearer ${key}` } })).json()) as { pricing: unknown };
    expect(shown.pricing).toMatchObject({ input_chf_per_million_tokens: 1, output_chf_per_million_tokens: 2 });

    // As many at once as the budget's holds let in (about 7 of 10 here), each held at the API's prices.
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        fetch(`${api}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: `Count ${i}.` }], max_tokens: 20 }),
        }).then(async (response) => ({ status: response.status, body: await response.json() })),
      ),
    );
    const served = answers.filter((a) => a.status === 200);
    expect(served.length).toBeGreaterThanOrEqual(3);

    const { rows } = await db.pool.query<{ data: { promptTokens: number; completionTokens: number; costMicroChf: number; priceTableVersion: string } }>(
      "SELECT data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    expect(rows).toHaveLength(served.length);
    const versions = new Map((await readPriceVersions(db.pool)).map((v) => [v.version, v.models[MODEL]]));
    const apiPrices = { inputMicroChfPerMillion: 1_000_000, outputMicroChfPerMillion: 2_000_000 };
    for (const { data } of rows) {
      // At the API's prices, under a published version that has them (an auditor's recomputation agrees).
      expect(data.costMicroChf).toBe(costMicroChf(data, apiPrices));
      expect(versions.get(data.priceTableVersion)).toMatchObject(apiPrices);
    }
    const spent = rows.reduce((sum, { data }) => sum + data.costMicroChf, 0);
    expect(spent).toBeLessThanOrEqual(BUDGET_CHF * 1_000_000);
  }, 120_000);
});
