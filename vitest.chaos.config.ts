import { defineConfig } from "vitest/config";

/** `npm run chaos`: the fault tests at full size (`*.chaos.test.ts`), kept out of `npm test` (vitest.config.ts). */
export default defineConfig({
  test: {
    include: ["test/**/*.chaos.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
