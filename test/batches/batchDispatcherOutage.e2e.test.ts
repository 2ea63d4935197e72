import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Pool } from "pg";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { createLogger } from "../../src/observability/logger.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";

/**
 * While PostgreSQL is away, each of the dispatcher's steps fails at every tick: an operator's probe saw 4
 * warning lines a second, each with its stack, for ten minutes. Each step's warning is written once, then
 * at most once per 10 s.
 */
describe("the batch dispatcher while PostgreSQL is away", () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("warns of each failing step once, not at every tick", async () => {
    const lines: string[] = [];
    const logger = createLogger("warn", {}, (line) => lines.push(line));
    const away = () => Promise.reject(new Error("Connection terminated due to connection timeout"));
    const pool = { query: away, connect: away, on: () => pool } as unknown as Pool;
    const dispatcher = new BatchDispatcher({ ...platform.deps, pool, logger }, platform.inference, platform.deps.files!);
    for (let i = 0; i < 5; i++) await dispatcher.tick();
    const failures = lines.map((line) => JSON.parse(line) as { message: string }).filter((line) => line.message.startsWith("batch dispatcher step failed"));
    const steps = failures.map((line) => line.message);
    expect(steps.length).toBeGreaterThan(0);
    expect(new Set(steps).size).toBe(steps.length);
    await dispatcher.stop();
  });
});
