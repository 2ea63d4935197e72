import { ConfigError, loadConfig } from "../config/config.ts";
import { checkPostgres, DependencyUnavailableError } from "./checkDependencies.ts";
import { createPool, poolTimeouts } from "../db/createPool.ts";
import { ensureDatabase } from "../db/ensureDatabase.ts";
import { migrate } from "../db/migrate.ts";

/**
 * `npm run migrate`: creates the database if it is missing and applies the migrations not applied yet
 * (every role does the same at start-up; this runs it alone, e.g. before a rolling deploy).
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  await checkPostgres(config.databaseUrl);
  if (await ensureDatabase(config.databaseUrl)) process.stdout.write("created the database\n");
  const pool = createPool(config.databaseUrl, 1, { timeouts: poolTimeouts(config, "background") });
  try {
    const applied = await migrate(pool);
    process.stdout.write(applied.length ? `applied ${applied.join(", ")}\n` : "the database is up to date\n");
  } finally {
    await pool.end();
  }
}

main().catch((error: unknown) => {
  const known = error instanceof ConfigError || error instanceof DependencyUnavailableError;
  process.stderr.write(known ? `${(error as Error).message}\n` : `migrate failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
