import type { Server } from "node:http";
import { createApiServer } from "./http/apiServer.ts";
import { createApp } from "./app.ts";
import type { AppDeps } from "./appDeps.ts";
import { ApiKeyAuth } from "./auth/apiKeyAuth.ts";
import { systemClock } from "../runtime/clock.ts";
import { createRedis } from "../redis/createRedis.ts";
import { createInferenceServices } from "./inference/inferenceServices.ts";
import { loadModelRegistry } from "../models/loadModelRegistry.ts";
import { publishPriceTable } from "../ledger/pricing/priceTable.ts";
import { routeFactories } from "./routes.ts";
import { SignIn } from "./accounts/signIn.ts";
import type { RoleContext, RunningRole } from "../runtime/role.ts";
import { PostgresFileStore } from "./files/postgresFileStore.ts";
import { FileRetentionSweeper } from "./files/fileRetentionSweeper.ts";
import { BatchDispatcher } from "./batches/batchDispatcher.ts";
import { ApiShutdown } from "./apiShutdown.ts";

export async function startApi({ config, pool, logger, metrics, localReplies }: RoleContext): Promise<RunningRole> {
  const redis = createRedis(config.redis, { kind: "fail-fast", timeouts: config.redisTimeouts });
  const unwatchRedis = metrics.sources.addRedis("api", redis);
  const keyAuth = new ApiKeyAuth({ pool, redis, redisPrefix: config.redisPrefix, logger });
  await keyAuth.start();
  // Holds are placed at the registry's prices and jobs carry them to be charged at: published, as a
  // worker publishes its own, so that every charge names a published version (docs/audit.md).
  const loaded = await loadModelRegistry(config.modelsConfigPath);
  const registry = loaded.withPriceTableVersion(await publishPriceTable(pool, loaded.priceTableVersion, loaded.prices(), systemClock.now()));
  const inference = createInferenceServices({ config, redis, logger, metrics, clock: systemClock, localReplies }, registry);
  const accounts = { pool, changes: keyAuth.accountChanges() };
  const signIn = new SignIn(config, redis);
  const files = new PostgresFileStore({ pool, clock: systemClock, retentionDays: config.files.retentionDays });
  const fileSweeper = new FileRetentionSweeper({ store: files, logger });
  fileSweeper.start();
  const shutdown = new ApiShutdown();
  const deps: AppDeps = { config, pool, redis, clock: systemClock, logger, metrics, accounts, keyAuth, signIn, inference, files, shutdown };
  const app = createApp(deps, routeFactories);
  // The Batch API's dispatcher runs in every API process (they share the work through PostgreSQL).
  const batches = new BatchDispatcher(deps, inference, files);
  batches.start();
  const handle = app.callback();
  const server: Server = createApiServer(handle, {
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    onRefusal: (code) => metrics.http.refusals.inc({ code }),
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  logger.info("api listening", { url: `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${config.port}`, host: config.host });
  return {
    async stop() {
      // Draining from now: /readyz answers 503 and every answer closes its connection.
      shutdown.begin();
      // close() ends the idle connections of this moment; one whose response ends later would stay open
      // for its keep-alive (65 s): ended as soon as it is idle, until the last one is gone.
      const idle = setInterval(() => server.closeIdleConnections(), 100);
      // Replies still relayed when the shutdown grace is nearly over end with an error that says so (a
      // stream's client resumes it elsewhere), rather than with a connection reset at the deadline.
      const notice = setTimeout(() => {
        const interrupted = inference.interruptRelays();
        if (interrupted > 0) logger.warn("shutdown grace nearly over: replies still relayed ended with server_shutting_down", { interrupted });
      }, relayNoticeMs(config.shutdownGraceMs));
      // The listener stays open until connections stop coming (acceptedUntilQuiet): those a client had
      // opened but this process had not accepted yet (a burst just before the signal) are taken and
      // answered; closed at once, the kernel reset them (a probe: 87 of 150 got no answer at all).
      await acceptedUntilQuiet(server, Math.min(BACKLOG_ACCEPT_MAX_MS, Math.floor(config.shutdownGraceMs / 4)));
      await new Promise<void>((resolve) => server.close(() => resolve())).finally(() => {
        clearInterval(idle);
        clearTimeout(notice);
      });
      server.closeAllConnections();
      await fileSweeper.stop();
      await batches.stop();
      await keyAuth.stop();
      await inference.close();
      unwatchRedis();
      redis.disconnect();
    },
  };
}

/** How long no connection must have come before a stopping API process closes its listener; and the most it waits. */
const BACKLOG_QUIET_MS = 250;
const BACKLOG_ACCEPT_MAX_MS = 5_000;

/**
 * Resolves once no connection was accepted for BACKLOG_QUIET_MS, checked after the event loop's poll phase
 * (a timer fires before the accepts waiting in that phase: a loop busy with a burst took the connections
 * still waiting for longer than a fixed second, and a probe saw a few reset), or after `maxMs`.
 */
async function acceptedUntilQuiet(server: Server, maxMs: number): Promise<void> {
  const started = performance.now();
  let last = started;
  const accepted = () => {
    last = performance.now();
  };
  server.on("connection", accepted);
  try {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, BACKLOG_QUIET_MS));
      // One turn through the poll phase: connections the kernel holds for this listener are accepted now.
      await new Promise((resolve) => setImmediate(resolve));
      const now = performance.now();
      if (now - started >= maxMs || now - last >= BACKLOG_QUIET_MS) return;
    }
  } finally {
    server.off("connection", accepted);
  }
}

/**
 * When, into the shutdown grace, the API ends the replies it still relays: 5 s before the grace is over
 * (the worker and the rest of the shutdown get those), but not before half of it.
 */
export function relayNoticeMs(graceMs: number): number {
  return Math.max(graceMs - 5_000, Math.floor(graceMs / 2));
}
