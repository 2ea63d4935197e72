import type { Config } from "../config.ts";
import { createPool, type Pool } from "../db/createPool.ts";
import { ensureDatabase } from "../db/ensureDatabase.ts";
import { migrate } from "../db/migrate.ts";
import type { Logger } from "../observability/logger.ts";
import { checkPostgres, checkRedis } from "./checkDependencies.ts";
import { startApi } from "./startApi.ts";
import { startWorker } from "../../workers/startWorker.ts";
import { startProjector } from "../../projections/startProjector.ts";

export const ROLE_NAMES = ["api", "worker", "projector"] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

export type RoleContext = { config: Config; pool: Pool; logger: Logger };
export type RunningRole = { stop(): Promise<void> };
type RoleStarter = (context: RoleContext) => Promise<RunningRole>;

const STARTERS: Record<RoleName, RoleStarter> = {
  api: startApi,
  worker: (context) => startWorker(context),
  projector: startProjector,
};

export type RunningPlatform = { stop(): Promise<void> };

/** Checks PostgreSQL and Redis, creates and migrates the database, then starts the roles in order. */
export async function startPlatform(config: Config, roles: RoleName[], logger: Logger): Promise<RunningPlatform> {
  await checkPostgres(config.databaseUrl);
  await checkRedis(config.redisUrl);
  if (await ensureDatabase(config.databaseUrl)) logger.info("created database");
  const pool = createPool(config.databaseUrl);
  const applied = await migrate(pool);
  if (applied.length) logger.info("applied migrations", { migrations: applied });
  const running: RunningRole[] = [];
  for (const role of roles) {
    running.push(await STARTERS[role]({ config, pool, logger: logger.child({ role }) }));
  }
  return {
    async stop() {
      for (const role of running.reverse()) await role.stop();
      await pool.end();
    },
  };
}
