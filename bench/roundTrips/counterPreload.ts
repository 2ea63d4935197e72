import { writeFileSync } from "node:fs";
import path from "node:path";
import { Redis } from "ioredis";
import pg from "pg";

/**
 * Loaded with `node --import` into a platform process by bench/roundTrips/countRoundTrips.ts: counts
 * every PostgreSQL statement (by prepared-statement name or first words of its text) and every Redis
 * command (by name, BullMQ's scripts by their SHA's script name where ioredis knows it) the process
 * sends, and writes the counts to ROUND_TRIP_COUNTS_DIR/<pid>.json when the process exits. Counting
 * only: what is sent is unchanged. Reset on SIGUSR2 (after the warm-up).
 */
const dir = process.env.ROUND_TRIP_COUNTS_DIR;
if (dir) {
  const statements = new Map<string, number>();
  const commands = new Map<string, number>();
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const first = args[0] as string | { name?: string; text?: string } | undefined;
    const text = typeof first === "string" ? first : (first?.name ?? first?.text ?? "?");
    bump(statements, text.replace(/\s+/g, " ").trim().slice(0, 70));
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query;
  const sendCommand = Redis.prototype.sendCommand as (...args: unknown[]) => unknown;
  Redis.prototype.sendCommand = function (this: Redis, ...args: unknown[]) {
    const command = args[0] as { name: string; args: unknown[] };
    const name = command.name === "evalsha" ? `evalsha:${scriptName(this, String(command.args[0]))}` : command.name;
    bump(commands, name);
    return sendCommand.apply(this, args);
  } as typeof Redis.prototype.sendCommand;
  process.on("SIGUSR2", () => {
    statements.clear();
    commands.clear();
  });
  process.on("exit", () => {
    const role = process.argv.filter((_, i, all) => all[i - 1] === "--role").join("+") || path.basename(process.argv[1] ?? "");
    writeFileSync(
      path.join(dir, `${process.pid}.json`),
      JSON.stringify({ role, statements: Object.fromEntries(statements), commands: Object.fromEntries(commands) }),
    );
  });
}

function scriptName(redis: Redis, sha: string): string {
  const scripts = (redis as unknown as { scriptsSet?: Record<string, { sha: string }> }).scriptsSet ?? {};
  for (const [name, script] of Object.entries(scripts)) if (script.sha === sha) return name;
  return sha.slice(0, 8);
}
