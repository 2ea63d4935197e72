import { loadConfig } from "../src/config.ts";
import { createPool } from "../src/db/createPool.ts";
import { migrate } from "../src/db/migrate.ts";
import { createLogger } from "../src/observability/logger.ts";
import { startProjector } from "./startProjector.ts";

/**
 * The projector alone, without the API and worker code: `node projections/main.ts`. The platform entry
 * (`npm run start:projector` = `node src/main.ts --role projector`) runs the same role; this one starts
 * faster and needs only PostgreSQL (used by the projector crash tests).
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger(config.logLevel, { service: "inference-platform", role: "projector" });
  const pool = createPool(config.databaseUrl, 4);
  await migrate(pool);
  const projector = await startProjector({ config, pool, logger });
  const stop = async () => {
    await projector.stop();
    await pool.end();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}

main().catch((error: unknown) => {
  process.stderr.write(`projector failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
