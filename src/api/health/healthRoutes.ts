import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { DEPENDENCY_RETRY_AFTER_SECONDS } from "../http/errors.ts";

/** How long /readyz waits for each dependency (checked side by side) before calling it down. */
const CHECK_TIMEOUT_MS = 1000;

type CheckResult = "ok" | "down";

/** Resolves "ok" when `probe` succeeds within CHECK_TIMEOUT_MS, else "down" (a late answer is ignored). */
async function check(probe: () => Promise<unknown>): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => resolve("down"), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([
      probe().then(
        (): CheckResult => "ok",
        (): CheckResult => "down",
      ),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Liveness and readiness for load balancers: no auth, no secrets. /readyz checks PostgreSQL and Redis
 * side by side and answers within about a second: 200 `{status: "ready", postgres: "ok", redis: "ok"}`,
 * or 503 `{status: "unavailable", postgres: "ok" | "down", redis: "ok" | "down"}` with Retry-After; 503
 * `{status: "draining"}` once the process was told to stop (ApiShutdown).
 */
export function healthRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  router.get("/healthz", (ctx) => {
    ctx.body = { status: "ok" };
  });
  router.get("/readyz", async (ctx) => {
    if (deps.shutdown?.draining) {
      // Told to stop: no new work for it, whatever its dependencies say.
      ctx.status = 503;
      ctx.set("retry-after", String(DEPENDENCY_RETRY_AFTER_SECONDS));
      ctx.body = { status: "draining" };
      return;
    }
    const [postgres, redis] = await Promise.all([check(() => deps.pool.query("SELECT 1")), check(() => deps.redis.ping())]);
    if (postgres === "ok" && redis === "ok") {
      ctx.body = { status: "ready", postgres, redis };
      return;
    }
    ctx.status = 503;
    ctx.set("retry-after", String(DEPENDENCY_RETRY_AFTER_SECONDS));
    ctx.body = { status: "unavailable", postgres, redis };
  });
  return router;
}
