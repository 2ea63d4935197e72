import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPool, DEFAULT_POOL_TIMEOUTS, type Pool, type PoolTimeouts } from "../../src/db/createPool.ts";

/**
 * The tests' own pools wait up to 30 s for a free connection: tests that run hundreds of operations at
 * once on 20 connections must not fail on a loaded CI machine. (The service's pools give up after
 * PG_CONNECT_TIMEOUT_MS; the fault tests build the API's pools with those.)
 */
export const TEST_POOL_TIMEOUTS: PoolTimeouts = { ...DEFAULT_POOL_TIMEOUTS, connectMs: 30_000 };
import { ADMIN_DATABASE_URL, databaseUrl, ensureTemplateDatabase } from "./templateDatabase.ts";

export type TestDatabase = { name: string; url: string; pool: Pool; drop(): Promise<void> };

/** A fresh, migrated database for one test file (cloned from the template), dropped by drop(). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const template = await ensureTemplateDatabase();
  const name = `inference_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    // CREATE ... TEMPLATE fails while another session is connected to the template; retry briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (error) {
        if (attempt > 50 || (error as { code?: string }).code !== "55006") throw error;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await admin.end();
  }
  const url = databaseUrl(name);
  const pool = createPool(url, 20, { timeouts: TEST_POOL_TIMEOUTS });
  return {
    name,
    url,
    pool,
    async drop() {
      await pool.end();
      const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
