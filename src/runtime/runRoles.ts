import { ConfigError, loadConfig } from "../config/config.ts";
import { createPool, type Pool, type PoolUse, poolTimeouts } from "../db/createPool.ts";
import { ensureDatabase } from "../db/ensureDatabase.ts";
import { migrate } from "../db/migrate.ts";
import { createLogger } from "../observability/logger.ts";
import { startTelemetry } from "../observability/telemetry.ts";
import { checkPostgres, checkRedis, DependencyUnavailableError } from "./checkDependencies.ts";
import type { RoleDefinition, RunningRole } from "./role.ts";

/**
 * The body of every entry point (src/main.ts, src/api/main.ts, workers/main.ts, projections/main.ts):
 * reads the configuration, checks PostgreSQL (and Redis when a role needs it), creates and migrates
 * the database, starts the roles in order, and stops them in reverse order on SIGINT / SIGTERM.
 * Exits 1 with a one-line reason when a dependency or the configuration is wrong.
 *
 * Each role gets a pool with the timeouts of its `poolUse` (roles of the same use share one).
 */
export function runRoles(roles: RoleDefinition[]): void {
  start(roles).catch((error: unknown) => {
    if (error instanceof ConfigError || error instanceof DependencyUnavailableError) {
      process.stderr.write(`${error.message}\n`);
    } else {
      process.stderr.write(`start-up failed: ${(error as Error).stack ?? String(error)}\n`);
    }
    process.exit(1);
  });
}

async function start(roles: RoleDefinition[]): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger(config.logLevel, { service: "inference-platform" });
  const telemetry = startTelemetry({ otlpEndpoint: config.otlpEndpoint });
  await checkPostgres(config.databaseUrl);
  if (roles.some((r) => r.needsRedis)) await checkRedis(config.redisUrl);
  if (await ensureDatabase(config.databaseUrl)) logger.info("created database");
  const migrations = createPool(config.databaseUrl, 1, { keepOpen: 0, timeouts: poolTimeouts(config, "background") });
  try {
    const applied = await migrate(migrations);
    if (applied.length) logger.info("applied migrations", { migrations: applied });
  } finally {
    await migrations.end();
  }
  const pools = new Map<PoolUse, Pool>();
  const poolFor = (use: PoolUse): Pool => {
    let pool = pools.get(use);
    if (!pool) {
      pool = createPool(config.databaseUrl, 10, { timeouts: poolTimeouts(config, use) });
      pools.set(use, pool);
    }
    return pool;
  };
  const running: RunningRole[] = [];
  for (const role of roles) running.push(await role.start({ config, pool: poolFor(role.poolUse), logger: logger.child({ role: role.name }) }));
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("shutting down", { signal });
    for (const role of running.reverse()) await role.stop();
    await Promise.all([...pools.values()].map((p) => p.end()));
    await telemetry.shutdown();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}
