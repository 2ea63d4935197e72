import { parseArgs } from "node:util";
import { loadConfig } from "../../src/config/config.ts";
import { createPool, poolTimeouts } from "../../src/db/createPool.ts";
import { migrate } from "../../src/db/migrate.ts";
import { formatAuditReport } from "./formatAuditReport.ts";
import { verifyAudit } from "./verifyAudit.ts";

const USAGE = `usage: npm run audit -- verify [--account ID] [--from ISO-TIME] [--to ISO-TIME] [--skip-read-models]
  Walks the hash chains and checkpoints, recomputes every charge from the price table versions and the
  read models from the log; exits 1 naming each stream and version that differs, 0 when all agree.`;

function parseTime(name: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const time = new Date(value);
  if (Number.isNaN(time.getTime())) throw new UsageError(`--${name} is not a time: ${value}`);
  return time;
}

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      account: { type: "string" },
      from: { type: "string" },
      to: { type: "string" },
      "skip-read-models": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== "verify") throw new UsageError(USAGE);
  const scope = {
    ...(values.account ? { accountId: values.account } : {}),
    ...(values.from ? { from: parseTime("from", values.from)! } : {}),
    ...(values.to ? { to: parseTime("to", values.to)! } : {}),
  };
  const config = loadConfig(process.env);
  // An operator tool: no statement limit, and no idle-in-transaction limit (it holds one snapshot open
  // across a whole log while a second connection or the process itself works).
  const pool = createPool(config.databaseUrl, 2, { timeouts: { ...poolTimeouts(config, "background"), statementMs: 0, queryMs: 0, idleInTransactionMs: 0 } });
  try {
    await migrate(pool);
    const report = await verifyAudit(pool, { ...scope, readModels: !values["skip-read-models"] });
    process.stdout.write(formatAuditReport(report));
    return report.findingCount === 0 ? 0 : 1;
  } finally {
    await pool.end();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`${(error as Error).message}\n`);
      process.exit(2);
    }
    process.stderr.write(`audit failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(2);
  },
);
