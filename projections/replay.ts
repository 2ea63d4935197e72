import { parseArgs } from "node:util";
import { loadConfig } from "../src/config/config.ts";
import { createPool, poolTimeouts } from "../src/db/createPool.ts";
import { migrate } from "../src/db/migrate.ts";
import { allProjections } from "./allProjections.ts";
import { rebuildProjections } from "./rebuildProjections.ts";
import { replayReadModels } from "./replayReadModels.ts";

/**
 * `npm run replay`: rebuilds every read model from the event log into scratch tables (rolled back
 * afterwards) and compares them with the live tables. Prints a report; exits 1 on any difference.
 *
 * `npm run replay -- --rebuild`: first rebuilds the projected read models in place (empties them, resets
 * their checkpoints and re-projects the whole log), then compares as above.
 */
async function main(): Promise<number> {
  const { values } = parseArgs({ options: { rebuild: { type: "boolean", default: false } } });
  const config = loadConfig(process.env);
  // The comparisons scan whole tables: no statement timeout (still the connect and idle-in-transaction ones).
  // An operator tool: no statement limit, and no idle-in-transaction limit (it holds one snapshot open
  // across a whole log while a second connection or the process itself works).
  const pool = createPool(config.databaseUrl, 2, { timeouts: { ...poolTimeouts(config, "background"), statementMs: 0, queryMs: 0, idleInTransactionMs: 0 } });
  try {
    await migrate(pool);
    if (values.rebuild) {
      for (const r of await rebuildProjections(pool, allProjections)) {
        process.stdout.write(
          `rebuilt ${r.projection}: ${r.eventsApplied} events applied, checkpoint (${r.checkpoint.transactionId}, ${r.checkpoint.globalPosition})\n`,
        );
      }
    }
    const report = await replayReadModels(pool, allProjections);
    for (const m of report.models) {
      const ok = m.onlyLive.length === 0 && m.onlyRebuilt.length === 0;
      process.stdout.write(`${ok ? "ok  " : "DIFF"} ${m.model}: live ${m.liveRows} rows, rebuilt ${m.rebuiltRows} rows\n`);
      if (!ok) process.stdout.write(`${JSON.stringify({ onlyLive: m.onlyLive, onlyRebuilt: m.onlyRebuilt }, null, 2)}\n`);
    }
    process.stdout.write(`${report.eventsRead} events replayed, ${report.differences} read model(s) differ\n`);
    return report.differences ? 1 : 0;
  } finally {
    await pool.end();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`replay failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(2);
  },
);
