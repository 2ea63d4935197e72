import type { RouteFactory } from "./app.ts";
import { accountRoutes } from "./accounts/accountRoutes.ts";
import { adminRoutes } from "./admin/adminRoutes.ts";
import { inferenceAuthRoutes } from "./auth/inferenceAuthRoutes.ts";
import { healthRoutes } from "./health/healthRoutes.ts";
import { usageRoutes } from "./usage/usageRoutes.ts";
import { auditLogRoutes } from "./audit/auditLogRoutes.ts";
import { apiKeyRoutes } from "./keys/apiKeyRoutes.ts";
import { modelsRoutes } from "./models/modelsRoutes.ts";
import { inferenceRoutes } from "./inference/inferenceRoutes.ts";
import { metricsRoutes } from "./metrics/metricsRoutes.ts";
import { consoleRoutes } from "./console/consoleRoutes.ts";
import { filesRoutes } from "./files/filesRoutes.ts";
import { batchRoutes } from "./batches/batchRoutes.ts";

/**
 * Every slice's router, in the order they are mounted. inferenceAuthRoutes guards every `/v1` path:
 * keep it before any router that serves `/v1/*`. The `/v1` routers come first because they carry
 * nearly all the traffic: every router a request passes matches its path against each of its routes.
 */
export const routeFactories: RouteFactory[] = [
  inferenceAuthRoutes,
  inferenceRoutes,
  modelsRoutes,
  filesRoutes,
  batchRoutes,
  healthRoutes,
  accountRoutes,
  adminRoutes,
  apiKeyRoutes,
  usageRoutes,
  auditLogRoutes,
  metricsRoutes,
  // The web console (its pages, assets and cookie session); last: it serves `/` and a few page paths.
  consoleRoutes,
];
