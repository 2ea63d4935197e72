import { allProjections } from "../../projections/allProjections.ts";
import { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import type { TestPlatform } from "./testPlatform.ts";

/** Every projection of the platform's database, running (small batches, quick polls); stop() it in afterAll. */
export function startTestProjector(platform: TestPlatform): ProjectionRunner {
  const runner = new ProjectionRunner({ pool: platform.deps.pool, logger: silentLogger, projections: allProjections, batchSize: 100, pollIntervalMs: 50 });
  runner.start();
  return runner;
}
