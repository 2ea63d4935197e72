import { randomBytes } from "node:crypto";
import { loadavg, cpus } from "node:os";
import { parseArgs } from "node:util";
import pg from "pg";
import { loadConfig } from "../../src/config/config.ts";
import { createPool, poolTimeouts } from "../../src/db/createPool.ts";
import { migrate } from "../../src/db/migrate.ts";
import { measureAudit } from "./measureAudit.ts";

/**
 * `npm run bench:audit -- [--events 1000000] [--keep]`: builds a log of N events in a fresh database
 * (`inference_audit_bench_<random>`, dropped at the end unless --keep) and measures replay and verify:
 * events per second and peak memory per phase (docs/benchmarks.md). Exit 1 when verify finds anything.
 */
async function main(): Promise<number> {
  const { values } = parseArgs({ options: { events: { type: "string", default: "1000000" }, keep: { type: "boolean", default: false } } });
  const events = Number(values.events);
  if (!Number.isInteger(events) || events < 10) throw new Error("--events must be an integer >= 10");
  const config = loadConfig(process.env);
  const url = new URL(config.databaseUrl);
  const name = `inference_audit_bench_${randomBytes(5).toString("hex")}`;
  const admin = new URL(config.databaseUrl);
  admin.pathname = "/postgres";
  const adminClient = new pg.Client({ connectionString: admin.toString() });
  await adminClient.connect();
  await adminClient.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  url.pathname = `/${name}`;
  // An operator tool: no statement limit, and no idle-in-transaction limit (it holds one snapshot open
  // across a whole log while a second connection or the process itself works).
  const pool = createPool(url.toString(), 4, { timeouts: { ...poolTimeouts(config, "background"), statementMs: 0, queryMs: 0, idleInTransactionMs: 0 } });
  const load = loadavg()[0]!;
  if (load > cpus().length / 2) process.stderr.write(`warning: load average ${load.toFixed(1)} on ${cpus().length} cores: figures are not comparable\n`);
  try {
    await migrate(pool);
    const result = await measureAudit(pool, events);
    process.stdout.write(
      `audit bench: ${result.build.events} events (${result.build.accounts} accounts, ${result.build.completions} completions), node ${process.version}, ${cpus().length} cores, load ${load.toFixed(1)}\n`,
    );
    process.stdout.write("| phase | events | seconds | events/s | peak RSS MB | peak heap MB |\n|---|---|---|---|---|---|\n");
    for (const p of result.phases)
      process.stdout.write(`| ${p.name} | ${p.events} | ${p.seconds.toFixed(1)} | ${p.eventsPerSecond} | ${p.peakRssMb} | ${p.peakHeapMb} |\n`);
    const differences = result.compare.differences;
    process.stdout.write(
      `verify: ${result.verify.findingCount} finding(s), ${result.verify.charges.charges} charges recomputed; read models: ${differences} differ\n`,
    );
    return result.verify.findingCount === 0 && differences === 0 ? 0 : 1;
  } finally {
    await pool.end();
    if (!values.keep) await adminClient.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
    else process.stdout.write(`kept database ${name}\n`);
    await adminClient.end();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench:audit failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(2);
  },
);
