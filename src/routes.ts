import type { RouteFactory } from "./app.ts";
import { healthRoutes } from "./health/healthRoutes.ts";

/** Every slice's router, in the order they are mounted. */
export const routeFactories: RouteFactory[] = [healthRoutes];
