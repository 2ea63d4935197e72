import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { createPool, type Pool } from "../src/db/createPool.ts";
import { placeHold } from "../src/ledger/budget/placeHold.ts";
import { createTestDatabase } from "../test/support/testDatabase.ts";
import { createBudgetedAccount } from "../test/usage/usageFixtures.ts";
import { clockTicksPerSecond, processCpuMs } from "./processCpu.ts";

/**
 * What the API's budget hold costs per request: `--holds` placeHold calls (default 2,000) on `--accounts`
 * accounts with a large budget (default 1, as the closed-loop bench's tenant), at `--concurrency`
 * in flight (default 1 and 32, one run each), on a pool like the API's hold pool (at most 10 connections,
 * synchronous_commit off). Reports per hold this
 * process's CPU time (the pg client: building, sending and parsing the statement), the CPU time of the
 * pool's PostgreSQL backends (user + system from /proc/<pid>/stat, pids from pg_backend_pid()) and the
 * wall time. `node bench/placeHoldBench.ts --holds 2000 --concurrency 1,32`.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      holds: { type: "string", default: "2000" },
      accounts: { type: "string", default: "1" },
      concurrency: { type: "string", default: "1,32" },
    },
  });
  const holds = Number(values.holds);
  const db = await createTestDatabase();
  try {
    const now = new Date();
    const accounts = await Promise.all(Array.from({ length: Number(values.accounts) }, () => createBudgetedAccount(db.pool, 1e15, now)));
    const ticks = await clockTicksPerSecond();
    for (const concurrency of values.concurrency.split(",").map(Number)) {
      const size = Math.min(concurrency, 10);
      const pool = createPool(db.url, size, { keepOpen: size, synchronousCommit: false });
      try {
        let next = 0;
        const place = () => placeHold(pool, { holdId: `chatcmpl-${randomUUID()}`, accountId: accounts[next++ % accounts.length]!, amountMicroChf: 5_000, now });
        const loop = async (count: number) => {
          next = 0;
          const lane = async () => {
            while (next < count) if (!(await place()).ok) throw new Error("hold refused");
          };
          await Promise.all(Array.from({ length: concurrency }, lane));
        };
        await loop(Math.max(200, concurrency * 10));
        const pids = await backendPids(pool, size);
        const cpu = async () => (await Promise.all(pids.map((pid) => processCpuMs(pid, ticks)))).reduce<number>((sum, ms) => sum + (ms ?? 0), 0);
        const before = { pg: await cpu(), node: process.cpuUsage(), at: performance.now() };
        await loop(holds);
        const wallMs = performance.now() - before.at;
        const node = process.cpuUsage(before.node);
        const pgMs = (await cpu()) - before.pg;
        const per = (ms: number) => (ms / holds).toFixed(3);
        console.log(
          `${holds} holds, ${concurrency} in flight, ${accounts.length} account(s): per hold PostgreSQL ${per(pgMs)} ms CPU (${pids.length} backends),` +
            ` this process ${per((node.user + node.system) / 1000)} ms CPU, wall ${per(wallMs)} ms (${Math.round((holds * 1000) / wallMs)} holds/s)`,
        );
      } finally {
        await pool.end();
      }
    }
  } finally {
    await db.drop();
  }
}

/** The backends of a pool of `size` connections: `size` connections checked out at once, each asked its pid. */
async function backendPids(pool: Pool, size: number): Promise<number[]> {
  const clients = await Promise.all(Array.from({ length: size }, () => pool.connect()));
  try {
    return await Promise.all(clients.map(async (client) => (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid));
  } finally {
    for (const client of clients) client.release();
  }
}

await main();
