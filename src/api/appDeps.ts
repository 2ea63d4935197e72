import type { ApiKeyAuth } from "./auth/apiKeyAuth.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Config } from "../config/config.ts";
import type { Pool } from "../db/createPool.ts";
import type { AccountCommandContext } from "../ledger/accounts/accountCommandContext.ts";
import type { InferenceServices } from "./inference/inferenceServices.ts";
import type { Redis } from "../redis/createRedis.ts";
import type { Logger } from "../observability/logger.ts";
import type { PlatformMetrics } from "../observability/metrics.ts";
import type { SignIn } from "./accounts/signIn.ts";
import type { FileStore } from "./files/fileStore.ts";
import type { ApiShutdown } from "./apiShutdown.ts";

/** What the API's route factories are built from. Passed in, never imported as globals. */
export type AppDeps = {
  config: Config;
  pool: Pool;
  redis: Redis;
  clock: Clock;
  logger: Logger;
  /** The process's Prometheus registry and metrics (shared with the other roles of the process). */
  metrics: PlatformMetrics;
  /** Account commands: the pool, and the invalidation of cached authorisations after each committed change. */
  accounts: AccountCommandContext;
  /** API-key auth cache (pub/sub invalidated) and last-used batcher: one per API process, started/stopped by its owner. */
  keyAuth: ApiKeyAuth;
  /** Password hashing gate and sign-in attempt limits: one per API process, shared by every login route. */
  signIn: SignIn;
  /** Model registry, queues and the shared delta subscriber; absent in apps built without inference (inference routes then answer 503). */
  inference?: InferenceServices;
  /** The Files API's store (PostgreSQL, chunked): uploads, and the files the Batch API reads and writes. */
  files: FileStore;
  /** Whether the process drains (its shutdown began); absent: it never does (tests, tools). */
  shutdown?: ApiShutdown;
};
