import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "workers/**/*.test.ts", "projections/**/*.test.ts", "tools/**/*.test.ts", "bench/**/*.test.ts", "test/**/*.test.ts"],
    // Fault tests at full size run with `npm run chaos` (vitest.chaos.config.ts).
    exclude: ["**/node_modules/**", "**/*.chaos.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
