import { randomUUID } from "node:crypto";
import { systemClock } from "../../runtime/clock.ts";
import { ConfigError, loadConfig, type Config } from "../../config/config.ts";
import { publishAuthInvalidation } from "../../contracts/authInvalidation.ts";
import { createRedis } from "../../redis/createRedis.ts";
import { createPool, poolTimeouts } from "../../db/createPool.ts";
import { ensureDatabase } from "../../db/ensureDatabase.ts";
import { migrate } from "../../db/migrate.ts";
import { DomainError } from "../../ledger/domainError.ts";
import { ApiError } from "../http/errors.ts";
import { checkPostgres, DependencyUnavailableError } from "../../runtime/checkDependencies.ts";
import { exportAuditLog } from "./exportAuditLog.ts";
import { operatorActions } from "./operatorActions.ts";
import { ADMIN_USAGE, AdminUsageError, parseAdminArgs, type AdminCommand } from "./parseAdminArgs.ts";

/**
 * Who an operator's change is recorded as: the channel it came by (`admin:cli` here, `admin:http` through
 * the admin API), so an auditor tells the two apart. Never the operator's login or host: the account's own
 * audit log shows its events' metadata to the account's holder.
 */
const ADMIN_CLI_ACTOR = "admin:cli";

/**
 * The operator CLI: `npm run admin -- <command> [options]`. A thin front end over operatorActions, like
 * the admin HTTP API, but talking to the database directly. JSON on stdout; errors on stderr with a
 * non-zero exit status (2: bad input, 1: anything else, e.g. no such account).
 */
async function run(command: Exclude<AdminCommand, { command: "help" }>): Promise<unknown> {
  const config = loadConfig(process.env);
  await checkPostgres(config.databaseUrl);
  await ensureDatabase(config.databaseUrl);
  const pool = createPool(config.databaseUrl, 2, { timeouts: poolTimeouts(config, "background") });
  try {
    await migrate(pool);
    const accounts = { pool, changes: { committed: (accountId: string) => notifyApiProcesses(config, accountId) } };
    const deps = { pool, clock: systemClock, accounts };
    if (command.command === "find-account") return await operatorActions.findAccount(deps, command.selector);
    if (command.command === "export") {
      const account = await operatorActions.findAccount(deps, command.selector);
      await exportAuditLog(pool, account.id, command.format, process.stdout);
      return undefined;
    }
    if (command.command === "set-rate-limits") {
      const set = await operatorActions.setRateLimits(deps, command.selector, command.limits, { correlationId: randomUUID(), actor: ADMIN_CLI_ACTOR });
      return set.account;
    }
    const result = await operatorActions.setSubscription(deps, command.selector, command.change, {
      correlationId: randomUUID(),
      actor: ADMIN_CLI_ACTOR,
    });
    return result.account;
  } finally {
    await pool.end();
  }
}

/** Tells running API processes to drop cached authorisations of the account (best effort: their cache TTL is the safety net). */
async function notifyApiProcesses(config: Config, accountId: string): Promise<void> {
  const redis = createRedis(config.redis, { kind: "fail-fast", timeouts: config.redisTimeouts, lazyConnect: true });
  try {
    await Promise.race([
      redis.connect().then(() => publishAuthInvalidation(redis, config.redisPrefix, { accountId })),
      new Promise((resolve) => setTimeout(resolve, 2000)),
    ]);
  } catch {
    process.stderr.write("warning: Redis did not answer; running API processes notice the change within their cache TTL\n");
  } finally {
    redis.disconnect();
  }
}

async function main(): Promise<number> {
  let command: AdminCommand;
  try {
    command = parseAdminArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof AdminUsageError)) throw error;
    process.stderr.write(`error: ${error.message}\n\n${ADMIN_USAGE}\n`);
    return 2;
  }
  if (command.command === "help") {
    process.stdout.write(`${ADMIN_USAGE}\n`);
    return 0;
  }
  try {
    const result = await run(command);
    if (result !== undefined) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof ConfigError || error instanceof DependencyUnavailableError) {
      process.stderr.write(`error: ${error.message}\n`);
    } else if (error instanceof ApiError || error instanceof DomainError) {
      process.stderr.write(`error: ${error.message} (${error.code ?? ("type" in error ? error.type : error.kind)})\n`);
    } else {
      process.stderr.write(`error: ${(error as Error).stack ?? String(error)}\n`);
    }
    return 1;
  }
}

process.exitCode = await main();
