import { createHash } from "node:crypto";
import type { Pool, PoolClient } from "../../src/db/createPool.ts";
import { withTransaction } from "../../src/db/withTransaction.ts";
import { AccountEventSchema, accountStreamId } from "../../src/ledger/accounts/accountEvents.ts";
import { projectAccountRow } from "../../src/ledger/accounts/projectAccountRow.ts";
import { projectKeyRows } from "../../src/ledger/accounts/projectKeyRows.ts";
import { eventHash } from "../../src/ledger/eventStore/eventHash.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { publishPriceTable, type PriceTable } from "../../src/ledger/pricing/priceTable.ts";
import { completionStreamId } from "../../src/ledger/usageRecordedEvent.ts";

export type BuildOptions = {
  /** Events to write in all (accounts, keys, usage). */
  events: number;
  /** Events per account: 6 account events (registration, subscription, budget, 3 keys) and usage. */
  eventsPerAccount?: number;
  /** Events per insert transaction. */
  batchSize?: number;
};

export type BuildResult = { events: number; accounts: number; completions: number; costMicroChf: number };

export const BENCH_MODEL = "bench-model";
const PRICES: PriceTable = { [BENCH_MODEL]: { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 1_500_000 } };
const KEYS_PER_ACCOUNT = 3;
/** The synthetic history spans 90 days from here (three billing periods). */
const HISTORY_START = Date.UTC(2025, 0, 1);
const HISTORY_MS = 90 * 86_400_000;

type Pending = {
  streamId: string;
  streamType: string;
  version: number;
  eventId: string;
  type: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  recordedAt: string;
  prevHash: string | null;
  hash: string;
};

/** Deterministic ids and numbers (the same log for the same options). */
function uuidFrom(seed: string): string {
  const h = createHash("sha256").update(seed).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Writes a synthetic history of `events` events (many accounts, each with keys and completions) through
 * a bulk path: one multi-row INSERT per batch (unnest), with the same hash chain appendToStream
 * computes, the inline read models the account commands keep (rm_accounts, rm_keys) and the budget's
 * spent figures the settles keep, so `npm run audit -- verify` agrees with it. The price table is
 * published through the ledger's own publishPriceTable.
 */
export async function buildAuditLog(pool: Pool, options: BuildOptions): Promise<BuildResult> {
  const perAccount = Math.max(options.eventsPerAccount ?? 200, 2 + 1 + KEYS_PER_ACCOUNT);
  const batchSize = options.batchSize ?? 5000;
  const version = await publishPriceTable(pool, "bench-1", PRICES, new Date(HISTORY_START - 86_400_000));
  const total = Math.max(0, options.events - 1);
  const accounts = Math.max(1, Math.ceil(total / perAccount));
  const result: BuildResult = { events: 1, accounts: 0, completions: 0, costMicroChf: 0 };
  let pending: Pending[] = [];
  let written = 0;
  const tick = (n: number) => new Date(HISTORY_START + Math.floor((n / Math.max(1, total)) * HISTORY_MS)).toISOString();

  for (let a = 0; a < accounts && written < total; a++) {
    const accountId = uuidFrom(`account-${a}`);
    const stream = accountStreamId(accountId);
    const at = tick(written);
    const keyIds = Array.from({ length: KEYS_PER_ACCOUNT }, (_, k) => uuidFrom(`key-${a}-${k}`));
    const accountEvents = [
      { type: "AccountRegistered", data: { accountId, email: `bench-${a}@example.test`, registeredAt: at } },
      { type: "SubscriptionActivated", data: { accountId, activatedAt: at } },
      { type: "MonthlyBudgetSet", data: { accountId, monthlyBudgetMicroChf: 1_000_000_000, setAt: at } },
      ...keyIds.map((keyId, k) => ({
        type: "KeyCreated",
        data: { accountId, keyId, name: `key ${k}`, keyHash: createHash("sha256").update(keyId).digest("hex"), last4: keyId.slice(-4), createdAt: at },
      })),
    ];
    let prevHash: string | null = null;
    for (const [i, event] of accountEvents.entries()) {
      if (written >= total) break;
      const p = chained(stream, "account", i + 1, uuidFrom(`event-${a}-${i}`), event.type, event.data, { actor: "bench" }, at, prevHash);
      pending.push(p);
      prevHash = p.hash;
      written++;
    }
    result.accounts++;
    for (let c = 0; c < perAccount - accountEvents.length && written < total; c++) {
      const completionId = uuidFrom(`completion-${a}-${c}`);
      const finishedAt = tick(written);
      const promptTokens = 10 + ((a * 31 + c * 17) % 2000);
      const completionTokens = 1 + ((a * 13 + c * 7) % 500);
      const cost = costMicroChf({ promptTokens, completionTokens }, PRICES[BENCH_MODEL]!);
      const data = {
        completionId,
        accountId,
        keyId: keyIds[c % KEYS_PER_ACCOUNT]!,
        model: BENCH_MODEL,
        endpoint: "chat.completions",
        promptTokens,
        completionTokens,
        reasoningTokens: 0,
        costMicroChf: cost,
        priceTableVersion: version,
        outcome: "finished",
        startedAt: finishedAt,
        finishedAt,
        traceId: null,
      };
      pending.push(
        chained(completionStreamId(completionId), "completion", 1, uuidFrom(`usage-${a}-${c}`), "UsageRecorded", data, { actor: "worker" }, finishedAt, null),
      );
      result.completions++;
      result.costMicroChf += cost;
      written++;
    }
    if (pending.length >= batchSize) {
      await insertBatch(pool, pending);
      pending = [];
    }
  }
  if (pending.length) await insertBatch(pool, pending);
  result.events += written;
  await pool.query(
    `INSERT INTO rm_budget (account_id, period_start, budget_micro_chf, spent_micro_chf)
     SELECT (data->>'accountId')::uuid, date_trunc('month', (data->>'finishedAt')::timestamptz AT TIME ZONE 'UTC')::date, 1000000000, sum((data->>'costMicroChf')::bigint)
       FROM es_events WHERE event_type = 'UsageRecorded' GROUP BY 1, 2`,
  );
  return result;
}

function chained(
  streamId: string,
  streamType: string,
  version: number,
  eventId: string,
  type: string,
  data: Record<string, unknown>,
  metadata: Record<string, unknown>,
  recordedAt: string,
  prevHash: string | null,
): Pending {
  const hash = eventHash({ prevHash, streamId, streamVersion: version, eventId, type, schemaVersion: 1, data, metadata, recordedAt });
  return { streamId, streamType, version, eventId, type, data, metadata, recordedAt, prevHash, hash };
}

/** One transaction: the stream rows (head = last event of each stream), the events, the inline read models. */
async function insertBatch(pool: Pool, events: Pending[]): Promise<void> {
  const heads = new Map<string, Pending>();
  for (const e of events) heads.set(e.streamId, e);
  await withTransaction(pool, async (client: PoolClient) => {
    await client.query(
      `INSERT INTO es_streams (stream_id, stream_type, version, head_hash)
       SELECT s, t, v, decode(h, 'hex') FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS u(s, t, v, h)`,
      [[...heads.keys()], [...heads.values()].map((e) => e.streamType), [...heads.values()].map((e) => e.version), [...heads.values()].map((e) => e.hash)],
    );
    await client.query(
      `INSERT INTO es_events (stream_id, stream_version, event_id, event_type, data, metadata, recorded_at, prev_hash, hash)
       SELECT s, v, id, t, d::jsonb, m::jsonb, r, decode(p, 'hex'), decode(h, 'hex')
         FROM unnest($1::text[], $2::bigint[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::text[], $9::text[])
              AS u(s, v, id, t, d, m, r, p, h)`,
      [
        events.map((e) => e.streamId),
        events.map((e) => e.version),
        events.map((e) => e.eventId),
        events.map((e) => e.type),
        events.map((e) => JSON.stringify(e.data)),
        events.map((e) => JSON.stringify(e.metadata)),
        events.map((e) => e.recordedAt),
        events.map((e) => e.prevHash),
        events.map((e) => e.hash),
      ],
    );
    for (const e of events) {
      if (e.streamType !== "account") continue;
      const parsed = AccountEventSchema.parse({ type: e.type, data: e.data });
      await projectAccountRow(client, parsed);
      await projectKeyRows(client, parsed);
    }
  });
}
