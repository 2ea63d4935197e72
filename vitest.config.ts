import { defineConfig } from "vitest/config";

/**
 * `npm test`: every test but the slow fault-injection ones (`*.chaos.test.ts`); `npm run chaos` (CHAOS=1):
 * all of test/faults, slow ones included.
 */
const chaos = process.env.CHAOS === "1";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "workers/**/*.test.ts", "projections/**/*.test.ts", "tools/**/*.test.ts", "bench/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...(chaos ? [] : ["**/*.chaos.test.ts"])],
    globalSetup: ["test/support/globalSetup.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
