import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { Pool } from "./db/createPool.ts";
import type { Redis } from "./messaging/createRedis.ts";
import type { Logger } from "./observability/logger.ts";

/** What the API's route factories are built from. Passed in, never imported as globals. */
export type AppDeps = {
  config: Config;
  pool: Pool;
  redis: Redis;
  clock: Clock;
  logger: Logger;
};
