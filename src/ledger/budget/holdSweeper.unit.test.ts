import { describe, expect, it } from "vitest";
import { createPool } from "../../db/createPool.ts";
import { createLogger } from "../../observability/logger.ts";
import { HoldSweeper } from "./holdSweeper.ts";

describe("the hold sweeper while PostgreSQL is away", () => {
  it("logs one warning for a run of failed sweeps (was an error line per sweep)", async () => {
    const lines: { level: string; message: string }[] = [];
    const logger = createLogger("debug", {}, (line) => lines.push(JSON.parse(line) as { level: string; message: string }));
    // Nothing listens on port 1: every connection is refused at once.
    const pool = createPool("postgres://postgres@127.0.0.1:1/none", 1, {
      timeouts: { connectMs: 500, statementMs: 500, queryMs: 500, idleInTransactionMs: 500 },
    });
    pool.on("error", () => undefined);
    const sweeper = new HoldSweeper({ pool, clock: { now: () => new Date() }, logger, maxHoldAgeMs: 60_000, intervalMs: 20 });
    try {
      sweeper.start();
      await new Promise((resolve) => setTimeout(resolve, 400));
    } finally {
      await sweeper.stop();
      await pool.end();
    }
    const sweeps = lines.filter((l) => l.message.startsWith("hold sweep failed"));
    expect(sweeps).toHaveLength(1);
    expect(sweeps[0]).toMatchObject({ level: "warn", message: "hold sweep failed: PostgreSQL unavailable, retried at the next sweep" });
  });
});
