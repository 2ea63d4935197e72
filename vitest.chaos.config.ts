import { defineConfig } from "vitest/config";

/** `npm run chaos`: every fault test (test/faults), the full-size ones (`*.chaos.test.ts`, kept out of `npm test`) included. */
export default defineConfig({
  test: {
    include: ["test/faults/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
