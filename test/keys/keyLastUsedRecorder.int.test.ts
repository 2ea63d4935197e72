import { describe, expect, it } from "vitest";
import { KeyLastUsedRecorder } from "../../src/api/keys/keyLastUsedRecorder.ts";
import { createPool } from "../../src/db/createPool.ts";
import { createLogger } from "../../src/observability/logger.ts";

describe("the keys' last-used recorder with PostgreSQL unreachable", () => {
  it("warns once per 10 s of its failing flushes, not at every flush", async () => {
    const lines: string[] = [];
    const logger = createLogger("warn", {}, (line) => lines.push(line));
    // Nothing listens on port 1 of the loopback: every flush fails at once.
    const unreachable = createPool("postgres://postgres@127.0.0.1:1/none", 2, { keepOpen: 0 });
    unreachable.on("error", () => undefined);
    const recorder = new KeyLastUsedRecorder({ db: unreachable, logger, flushIntervalMs: 100 });
    recorder.start();
    try {
      for (let i = 0; i < 10; i++) {
        recorder.record(`key-${i}`, new Date());
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await recorder.stop().catch(() => undefined);
      await unreachable.end();
    }
    // About ten failed flushes: one line (it was one per flush, 15 in 25 s in an outage).
    expect(lines.filter((line) => line.includes("last-used flush failed"))).toHaveLength(1);
  });
});
