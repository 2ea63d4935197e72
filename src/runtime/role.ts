import type { Config } from "../config/config.ts";
import type { LocalReplyChannels } from "../contracts/localReplyChannels.ts";
import type { Pool, PoolUse } from "../db/createPool.ts";
import type { Logger } from "../observability/logger.ts";
import type { PlatformMetrics } from "../observability/metrics.ts";

/**
 * What every role is started with. `pool` has the timeouts of the role's `poolUse`; `metrics` is the
 * process's one registry; `localReplies` the process's one set of API reply channels (an API role
 * registers its own; a worker role hands the messages of those jobs over in process instead of publishing them).
 */
export type RoleContext = { config: Config; pool: Pool; logger: Logger; metrics: PlatformMetrics; localReplies: LocalReplyChannels };

/** A started role; stop() drains it and frees what it holds (not the shared pool). */
export type RunningRole = { stop(): Promise<void> };

/** A role's start function, exported by the role's own folder (src/api, workers, projections). */
export type RoleStarter = (context: RoleContext) => Promise<RunningRole>;

/** A named role, as the launchers list them. */
export type RoleDefinition = {
  name: string;
  start: RoleStarter;
  /** Whether the role talks to Redis (checked at start-up, so a missing Redis is named at once). */
  needsRedis: boolean;
  /** The PostgreSQL timeouts its pool gets: `api` (HTTP request path, short) or `background` (see createPool). */
  poolUse: PoolUse;
};
