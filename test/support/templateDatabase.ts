import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { createPool } from "../../src/db/createPool.ts";
import { migrate, MIGRATIONS_DIR } from "../../src/db/migrate.ts";

export const ADMIN_DATABASE_URL = process.env.TEST_DATABASE_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export function databaseUrl(name: string): string {
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Name of the migrated template database for the current migration files (their content hash). */
export async function templateName(): Promise<string> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql")).sort();
  const hash = createHash("sha256");
  for (const f of files) hash.update(f).update(await readFile(path.join(MIGRATIONS_DIR, f)));
  return `inference_tpl_${hash.digest("hex").slice(0, 12)}`;
}

/** Creates and migrates the template database once per set of migrations (serialised across runs). */
export async function ensureTemplateDatabase(): Promise<string> {
  const name = await templateName();
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query("SELECT pg_advisory_lock(727002)");
    const exists = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (!exists.rowCount) {
      const building = `${name}_building`;
      await admin.query(`DROP DATABASE IF EXISTS ${building}`);
      await admin.query(`CREATE DATABASE ${building}`);
      const pool = createPool(databaseUrl(building), 2);
      try {
        await migrate(pool);
      } finally {
        await pool.end();
      }
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
    }
  } finally {
    await admin.query("SELECT pg_advisory_unlock(727002)").catch(() => undefined);
    await admin.end();
  }
  return name;
}
