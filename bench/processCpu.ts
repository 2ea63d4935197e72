import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import pg from "pg";
import { createRedis } from "../src/redis/createRedis.ts";

const run = promisify(execFile);

/**
 * CPU time (user + system, ms) of processes from /proc/<pid>/stat, read only: nothing is signalled.
 * A process that is gone reads as null.
 */
export async function processCpuMs(pid: number, ticksPerSecond: number): Promise<number | null> {
  const text = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => null);
  if (text === null) return null;
  // Fields after the command name (which is in parentheses and may hold spaces): state is field 3,
  // utime field 14 and stime field 15.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

export async function clockTicksPerSecond(): Promise<number> {
  const { stdout } = await run("getconf", ["CLK_TCK"]).catch(() => ({ stdout: "100" }));
  return Number(stdout.trim()) || 100;
}

/** CPU ms per pid: a snapshot of a group of processes. */
export type CpuSnapshot = Map<number, number>;

export async function snapshotCpu(pids: number[], ticksPerSecond: number): Promise<CpuSnapshot> {
  const snapshot: CpuSnapshot = new Map();
  for (const pid of pids) {
    const ms = await processCpuMs(pid, ticksPerSecond);
    if (ms !== null) snapshot.set(pid, ms);
  }
  return snapshot;
}

/**
 * CPU ms used between two snapshots: processes in both count their difference, processes that appear
 * only in `after` count all of theirs (they started in between). Processes that ended in between are
 * missed (their time is not readable any more).
 */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

/** The PostgreSQL server's processes: `pgrep -f postgres`, kept only where /proc/<pid>/comm is postgres. */
export async function postgresPids(): Promise<number[]> {
  const { stdout } = await run("pgrep", ["-f", "postgres"]).catch(() => ({ stdout: "" }));
  const pids: number[] = [];
  for (const pid of stdout.split("\n").filter(Boolean).map(Number)) {
    const comm = await readFile(`/proc/${pid}/comm`, "utf8").catch(() => "");
    if (comm.trim() === "postgres") pids.push(pid);
  }
  return pids;
}

/**
 * The PostgreSQL backends serving one database, from pg_stat_activity (read only) over one connection
 * to the server's `postgres` database, kept open so that asking starts no new backend. close() ends it.
 */
export function postgresBackends(databaseUrl: string, databaseName: string): { pids(): Promise<number[]>; close(): Promise<void> } {
  const url = new URL(databaseUrl);
  url.pathname = "/postgres";
  const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
  return {
    async pids() {
      const { rows } = await pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [databaseName]);
      return rows.map((row) => row.pid);
    },
    close: () => pool.end(),
  };
}

/** The redis-server's process id from `INFO server` (process_id). */
export async function redisPid(redisUrl: string): Promise<number | null> {
  const redis = createRedis(redisUrl, { kind: "fail-fast" });
  try {
    const info = await redis.info("server");
    const match = /^process_id:(\d+)/m.exec(info);
    return match ? Number(match[1]) : null;
  } finally {
    redis.disconnect();
  }
}
