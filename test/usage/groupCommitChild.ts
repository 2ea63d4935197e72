import { createPool } from "../../src/db/createPool.ts";
import { UsageGroupCommit } from "../../src/ledger/budget/usageGroupCommit.ts";
import type { UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";

/**
 * A process for usageGroupCommit.int.test.ts to kill mid-batch: records the usages given as JSON on
 * stdin through one UsageGroupCommit, all in the same event-loop turn (so in one batch), prints
 * "queued", then waits to be killed.
 */
const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error("DATABASE_URL is required");
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (part: string) => (input += part));
process.stdin.on("end", () => {
  const events = JSON.parse(input) as UsageRecorded[];
  const commits = new UsageGroupCommit(createPool(databaseUrl, 2), { maxBatch: events.length });
  for (const event of events) void commits.record(event).then(() => process.stdout.write("committed\n"));
  process.stdout.write("queued\n");
});
