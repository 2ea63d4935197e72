import { randomBytes } from "node:crypto";
import pg from "pg";
import { AccountEventSchema } from "../src/ledger/accounts/accountEvents.ts";
import { projectAccountRow } from "../src/ledger/accounts/projectAccountRow.ts";
import type { Pool, PoolClient } from "../src/db/createPool.ts";
import { compareLogPositions, LOG_START, type LogPosition } from "../src/ledger/eventStore/logPosition.ts";
import { readAllInSnapshot } from "../src/ledger/eventStore/readAll.ts";
import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";
import { projectKeyRows } from "../src/ledger/accounts/projectKeyRows.ts";
import { readCheckpoint } from "./checkpoint.ts";
import { readAhead } from "./readAhead.ts";
import type { Projection } from "./projection.ts";
import { usageColumns } from "./usageRecordedFrom.ts";

export type ModelDifference = {
  model: string;
  liveRows: number;
  rebuiltRows: number;
  /** Rows in the live table that the rebuild does not have (up to `sampleSize`). */
  onlyLive: Record<string, unknown>[];
  /** Rows of the rebuild that the live table does not have (up to `sampleSize`). */
  onlyRebuilt: Record<string, unknown>[];
};

export type ReplayReport = { eventsRead: number; models: ModelDifference[]; differences: number };

/** An inline read model (updated in the same transaction as its events) and the columns derived from events. */
type InlineModel = { table: string; columns: string[]; apply: (db: PoolClient, event: RecordedEvent) => Promise<void> };

const INLINE_MODELS: InlineModel[] = [
  {
    table: "rm_accounts",
    columns: ["account_id", "email", "subscription_status", "monthly_budget_micro_chf", "rate_limits", "created_at"],
    apply: async (db, event) => {
      const parsed = AccountEventSchema.safeParse({ type: event.type, data: event.data });
      if (parsed.success) await projectAccountRow(db, parsed.data);
    },
  },
  {
    table: "rm_keys",
    columns: ["key_id", "account_id", "name", "key_hash", "last4", "status", "created_at", "revoked_at"],
    apply: async (db, event) => {
      const parsed = AccountEventSchema.safeParse({ type: event.type, data: event.data });
      if (parsed.success) await projectKeyRows(db, parsed.data);
    },
  },
];

const atOrBefore = (event: RecordedEvent, checkpoint: LogPosition) => compareLogPositions(event, checkpoint) <= 0;

/**
 * Rebuilds every read model from the event log into fresh tables of a scratch schema and compares them
 * with the live ones. Everything happens in ONE repeatable-read transaction that is rolled back at the
 * end (nothing is left behind), so the live tables, the checkpoints and the log are read at one instant:
 * - projected models (projections/) are rebuilt from the events up to their live checkpoint;
 * - inline models (rm_accounts, rm_keys) from every account event, compared on their event-derived columns;
 * - rm_budget.spent_micro_chf (plus settled holds not folded yet) equals the sum of UsageRecorded costs per account and billing period
 *   (UTC month of finishedAt); held and budget are not history and are not compared.
 * The log is read on a second connection that shares the snapshot (pg_export_snapshot), one batch ahead
 * of the rebuild (readAhead): the pool needs two free connections.
 */
export async function replayReadModels(
  pool: Pool,
  projections: Projection[],
  options: { sampleSize?: number; batchSize?: number } = {},
): Promise<ReplayReport> {
  const sampleSize = options.sampleSize ?? 20;
  const batchSize = options.batchSize ?? 1000;
  const client = await pool.connect();
  // The log is read on a second connection sharing the snapshot, one batch ahead of the rebuild.
  let reader: PoolClient | null = null;
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ WRITE");
    const snapshot = (await client.query<{ id: string }>("SELECT pg_export_snapshot() AS id")).rows[0]!.id;
    reader = await pool.connect();
    await reader.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    await reader.query(`SET TRANSACTION SNAPSHOT ${pg.escapeLiteral(snapshot)}`);
    const logReader = reader;
    const live = (await client.query<{ s: string }>("SELECT current_schema() AS s")).rows[0]!.s;
    const checkpoints = new Map<string, LogPosition>();
    for (const p of projections) checkpoints.set(p.name, await readCheckpoint(client, p.name));

    const scratch = `replay_${randomBytes(6).toString("hex")}`;
    const q = (schema: string, table: string) => `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)}`;
    await client.query(`CREATE SCHEMA ${pg.escapeIdentifier(scratch)}`);
    const tables = [...projections.flatMap((p) => p.tables), ...INLINE_MODELS.map((m) => m.table)];
    for (const table of tables) await client.query(`CREATE TABLE ${q(scratch, table)} (LIKE ${q(live, table)} INCLUDING ALL)`);
    await client.query(
      `CREATE TABLE ${q(scratch, "budget_spent")} (account_id uuid, period_start date, spent_micro_chf bigint, PRIMARY KEY (account_id, period_start))`,
    );
    await client.query(`SET LOCAL search_path = ${pg.escapeIdentifier(scratch)}, ${pg.escapeIdentifier(live)}`);

    let eventsRead = 0;
    // The reader's search_path is the live schema's (the scratch schema is only on `client`'s).
    for await (const events of readAhead((after) => readAllInSnapshot(logReader, after, batchSize), LOG_START, { rereadEmpty: false })) {
      eventsRead += events.length;
      const usage = usageColumns(events);
      for (const p of projections) {
        const upTo = checkpoints.get(p.name)!;
        // Usually the whole batch (a live checkpoint behind the log cuts the last batches short).
        if (atOrBefore(events.at(-1)!, upTo)) await p.apply(client, events, usage);
        else {
          const applied = events.filter((event) => atOrBefore(event, upTo));
          if (applied.length) await p.apply(client, applied);
        }
      }
      for (const event of events) {
        // The inline models are built from the account streams only.
        if (!event.streamId.startsWith("account-")) continue;
        for (const m of INLINE_MODELS) await m.apply(client, event);
      }
      if (usage) {
        await client.query(
          `INSERT INTO ${q(scratch, "budget_spent")} AS b
           SELECT account_id::uuid, date_trunc('month', finished AT TIME ZONE 'UTC')::date, sum(cost)
             FROM unnest($1::text[], $2::bigint[], $3::timestamptz[]) AS u(account_id, cost, finished)
            GROUP BY 1, 2
           ON CONFLICT (account_id, period_start) DO UPDATE SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf`,
          [usage.accountId, usage.costMicroChf, usage.finishedAt],
        );
      }
    }

    const checks: { model: string; live: string; rebuilt: string }[] = [
      ...projections.flatMap((p) => p.tables.map((t) => ({ model: t, live: `SELECT * FROM ${q(live, t)}`, rebuilt: `SELECT * FROM ${q(scratch, t)}` }))),
      ...INLINE_MODELS.map((m) => {
        const cols = m.columns.map((c) => pg.escapeIdentifier(c)).join(", ");
        return { model: m.table, live: `SELECT ${cols} FROM ${q(live, m.table)}`, rebuilt: `SELECT ${cols} FROM ${q(scratch, m.table)}` };
      }),
      {
        model: "rm_budget.spent_micro_chf",
        // A settled hold not yet folded into rm_budget (see recordUsage) is spent too.
        live: `SELECT account_id, period_start, sum(spent)::bigint AS spent_micro_chf FROM (
                 SELECT account_id, period_start, spent_micro_chf AS spent FROM ${q(live, "rm_budget")}
                 UNION ALL
                 SELECT account_id, settled_period, settled_cost_micro_chf FROM ${q(live, "budget_holds")} WHERE settled_at IS NOT NULL
               ) s GROUP BY account_id, period_start HAVING sum(spent) <> 0`,
        rebuilt: `SELECT account_id, period_start, spent_micro_chf FROM ${q(scratch, "budget_spent")} WHERE spent_micro_chf <> 0`,
      },
    ];
    const models: ModelDifference[] = [];
    for (const check of checks) models.push(await compare(client, check, sampleSize));
    return { eventsRead, models, differences: models.filter((m) => m.onlyLive.length || m.onlyRebuilt.length).length };
  } finally {
    for (const c of [reader, client]) {
      if (!c) continue;
      await c.query("ROLLBACK").catch(() => undefined);
      c.release();
    }
  }
}

async function compare(client: PoolClient, check: { model: string; live: string; rebuilt: string }, sampleSize: number): Promise<ModelDifference> {
  const count = async (sql: string) => Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM (${sql}) x`)).rows[0]!.n);
  const diff = async (a: string, b: string) =>
    (await client.query<{ row: Record<string, unknown> }>(`SELECT to_jsonb(d) AS row FROM ((${a}) EXCEPT ALL (${b})) d LIMIT $1`, [sampleSize])).rows.map(
      (r) => r.row,
    );
  return {
    model: check.model,
    liveRows: await count(check.live),
    rebuiltRows: await count(check.rebuilt),
    onlyLive: await diff(check.live, check.rebuilt),
    onlyRebuilt: await diff(check.rebuilt, check.live),
  };
}
