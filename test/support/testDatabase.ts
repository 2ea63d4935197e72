import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPool, type Pool } from "../../src/db/createPool.ts";
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
  const pool = createPool(url, 20);
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
