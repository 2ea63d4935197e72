import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import type { Pool } from "./createPool.ts";

export const MIGRATIONS_DIR = new URL("../../migrations/", import.meta.url).pathname;

/** Arbitrary constant: the advisory lock that serialises migrations across processes. */
const MIGRATION_LOCK_KEY = 727_001;

/**
 * A migration may run long (an index on a big table) or wait for another process's migrations, so its
 * statements get no statement timeout and the pool's client-side query timeout is lifted to the longest
 * timer Node allows (pg cannot switch it off per query).
 */
const NO_QUERY_TIMEOUT_MS = 2_147_483_647;

/**
 * Applies every numbered `NNN_name.sql` file of `dir` not yet recorded in `schema_migrations`, in order,
 * each in its own transaction. Safe to run from several processes at once.
 */
export async function migrate(pool: Pool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const client = await pool.connect();
  const query = <R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]) => {
    // pg reads query_timeout from a query's config (its types do not list it).
    const config: pg.QueryConfig & { query_timeout: number } = { text, ...(values ? { values } : {}), query_timeout: NO_QUERY_TIMEOUT_MS };
    return client.query<R>(config);
  };
  const applied: string[] = [];
  try {
    await query("SET statement_timeout = 0");
    await query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    await query("CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())");
    const done = new Set((await query<{ name: string }>("SELECT name FROM schema_migrations")).rows.map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await readFile(path.join(dir, file), "utf8");
      await query("BEGIN");
      try {
        await query(sql);
        await query("INSERT INTO schema_migrations (name) VALUES ($1)", [file]);
        await query("COMMIT");
      } catch (error) {
        await query("ROLLBACK");
        throw new Error(`migration ${file} failed: ${(error as Error).message}`);
      }
      applied.push(file);
    }
  } finally {
    await query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => undefined);
    // Back to the pool's statement timeout; a connection that cannot say so is discarded.
    const reset = await query("RESET statement_timeout").then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    client.release(reset);
  }
  return applied;
}
