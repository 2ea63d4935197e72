import { ConfigError, loadConfig } from "../config/config.ts";
import { LocalReplyChannels } from "../contracts/localReplyChannels.ts";
import { createPool, type Pool, type PoolUse, poolTimeouts } from "../db/createPool.ts";
import { ensureDatabase } from "../db/ensureDatabase.ts";
import { migrate } from "../db/migrate.ts";
import { createLogger } from "../observability/logger.ts";
import { startTelemetry } from "../observability/telemetry.ts";
import { createMetrics } from "../observability/metrics.ts";
import { startMetricsServer } from "../observability/metricsServer.ts";
import { checkPostgres, checkRedis, DependencyUnavailableError } from "./checkDependencies.ts";
import type { RoleDefinition, RunningRole } from "./role.ts";
import { stopWithin } from "./stopWithin.ts";

/** A signal this soon after the one that started the shutdown is that same stop (npm passes a group's signal on). */
const SAME_STOP_MS = 1_000;

/**
 * The body of every entry point (src/main.ts, src/api/main.ts, workers/main.ts, projections/main.ts):
 * reads the configuration, checks PostgreSQL (and Redis when a role needs it), creates and migrates
 * the database, starts the roles in order, and stops them in the same order on SIGINT / SIGTERM (the
 * API first: its requests drain while the worker still serves them).
 * Exits 1 with a one-line reason when a dependency or the configuration is wrong.
 *
 * Each role gets a pool with the timeouts of its `poolUse` (roles of the same use share one). A stop
 * that takes longer than SHUTDOWN_GRACE_MS (a stream still running, a dependency that does not
 * answer) is cut: the process logs which roles had not finished and exits 1. A second signal exits at once
 * (one within SAME_STOP_MS of the first is the same stop, passed on by npm to its script).
 * `defaults` are settings of this entry point that the environment overrides (src/main.ts: METRICS_PORT).
 */
export function runRoles(roles: RoleDefinition[], defaults: Record<string, string> = {}): void {
  start(roles, defaults).catch((error: unknown) => {
    process.stderr.write(`${startupFailure(error)}\n`);
    process.exit(1);
  });
}

/** Errors of the listeners' addresses (PORT, METRICS_PORT, HOST): a setting to change, not a bug. */
const ADDRESS_ERRORS: Record<string, string> = {
  EADDRINUSE: "another process holds this port: set PORT (or METRICS_PORT) to a free one",
  EACCES: "this process may not listen on this port: set PORT (or METRICS_PORT) to one above 1023",
  EADDRNOTAVAIL: "HOST is no address of this machine",
  ENOTFOUND: "HOST is no address of this machine",
};

/**
 * What start-up says before it exits 1: the reason alone for a mistake of the configuration (a variable,
 * a port, the model registry or a model file it names), the stack only for a failure nobody foresaw.
 */
export function startupFailure(error: unknown): string {
  if (error instanceof ConfigError || error instanceof DependencyUnavailableError) return error.message;
  if (!(error instanceof Error)) return `start-up failed: ${String(error)}`;
  const hint = ADDRESS_ERRORS[(error as NodeJS.ErrnoException).code ?? ""];
  if (hint) return `start-up failed: ${error.message} (${hint}).`;
  if (error.name === "ModelRegistryError") return `start-up failed: ${error.message} (MODELS_CONFIG).`;
  // A model the registry names that cannot be loaded (a missing or unreadable file): the engine says which.
  if (error.name === "EngineError") return `start-up failed: ${error.message} (a model of MODELS_CONFIG).`;
  return `start-up failed: ${error.stack ?? error.message}`;
}

async function start(roles: RoleDefinition[], defaults: Record<string, string>): Promise<void> {
  const config = loadConfig({ ...defaults, ...process.env });
  const logger = createLogger(config.logLevel, { service: "inference-platform" });
  const telemetry = startTelemetry({
    otlpEndpoint: config.otlpEndpoint,
    serviceName: serviceNameOf(roles),
    onExportFailure: (report) => logger.warn("spans could not be sent to the OTLP collector (OTEL_EXPORTER_OTLP_ENDPOINT): dropped", report),
  });
  await checkPostgres(config.databaseUrl);
  if (roles.some((r) => r.needsRedis)) await checkRedis(config.redis);
  if (await ensureDatabase(config.databaseUrl)) logger.info("created database");
  const migrations = createPool(config.databaseUrl, 1, { keepOpen: 0, timeouts: poolTimeouts(config, "background") });
  try {
    const applied = await migrate(migrations);
    if (applied.length) logger.info("applied migrations", { migrations: applied });
  } finally {
    await migrations.end();
  }
  const metrics = createMetrics();
  // An API role and a worker role of this process: the worker hands that API's replies over in process.
  const localReplies = new LocalReplyChannels();
  const pools = new Map<PoolUse, Pool>();
  const poolFor = (use: PoolUse): Pool => {
    let pool = pools.get(use);
    if (!pool) {
      pool = createPool(config.databaseUrl, 10, {
        timeouts: poolTimeouts(config, use),
        onConnectionLost: (error) => logger.warn("postgres connection lost", { pool: use, error }),
      });
      pools.set(use, pool);
      metrics.sources.addPool(use, pool);
    }
    return pool;
  };
  // The entry point's default port (npm start: 9464) may be taken by another process of the platform on
  // the same host (`npm start --role ...` twice): that one keeps it; an explicitly set port must bind.
  const metricsPortIsDefault = process.env.METRICS_PORT === undefined && defaults.METRICS_PORT !== undefined;
  const metricsServer = config.metrics.port
    ? await startMetricsServer(metrics, { port: config.metrics.port, host: config.host }).catch((error: unknown) => {
        if (!metricsPortIsDefault || (error as NodeJS.ErrnoException).code !== "EADDRINUSE") throw error;
        logger.warn("the default metrics port is taken by another process: set METRICS_PORT for this one", { port: config.metrics.port });
        return null;
      })
    : null;
  if (metricsServer) logger.info("metrics listening", { port: metricsServer.port, host: config.host, path: "/metrics" });
  const running: { name: string; role: RunningRole }[] = [];
  let stoppingSince: number | null = null;
  const stop = async (signal: string) => {
    if (stoppingSince !== null) {
      // A signal to the whole process group (Ctrl-C in a terminal, `kill -- -PGID`, a supervisor's stop)
      // reaches this process twice under npm, which passes its own on: that is the same stop, not a
      // second one.
      if (performance.now() - stoppingSince < SAME_STOP_MS) return;
      logger.warn("second signal: exiting without waiting", { signal });
      process.exit(1);
    }
    stoppingSince = performance.now();
    logger.info("shutting down", { signal, graceMs: config.shutdownGraceMs });
    // In the order they started (API, worker, projector): the API drains its requests while the worker
    // still runs their jobs (queued ones included), then the worker drains its jobs, then the projector
    // records what they charged meanwhile.
    const steps = [
      ...running.map(({ name, role }) => ({ name, stop: () => role.stop() })),
      ...(metricsServer ? [{ name: "metrics listener", stop: () => metricsServer.close() }] : []),
      { name: "postgres pools", stop: () => Promise.all([...pools.values()].map((p) => p.end())) },
      { name: "telemetry", stop: () => telemetry.shutdown() },
    ];
    const outcome = await stopWithin(steps, config.shutdownGraceMs);
    if (outcome.cut.length) {
      logger.error("shutdown grace period exceeded: exiting with work still in flight", { graceMs: config.shutdownGraceMs, cut: outcome.cut });
      process.exit(1);
    }
    for (const failure of outcome.failed) logger.warn("a step of the shutdown failed", { step: failure.name, error: failure.error });
    logger.info("stopped", { ms: outcome.elapsedMs });
    process.exit(0);
  };
  // Before the roles start: a signal during start-up stops those already running.
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  for (const role of roles) {
    if (stoppingSince !== null) return;
    running.push({
      name: role.name,
      role: await role.start({ config, pool: poolFor(role.poolUse), logger: logger.child({ role: role.name }), metrics, localReplies }),
    });
  }
}

/** The service name of a process's spans: `inference-platform` for all roles, `inference-platform-api` for one. */
function serviceNameOf(roles: RoleDefinition[]): string {
  return roles.length === 1 ? `inference-platform-${roles[0]!.name}` : "inference-platform";
}
