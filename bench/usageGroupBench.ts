import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { createPool, type Pool } from "../src/db/createPool.ts";
import { placeHold } from "../src/ledger/budget/placeHold.ts";
import type { UsageRecordedData } from "../src/ledger/usageRecordedEvent.ts";
import { createTestDatabase } from "../test/support/testDatabase.ts";
import { createBudgetedAccount, usageEvent } from "../test/usage/usageFixtures.ts";
import { UsageRecorder } from "../workers/completion/usageRecorder.ts";
import { clockTicksPerSecond, processCpuMs } from "./processCpu.ts";

/**
 * The PostgreSQL side of recording usage, per usage: `--groups` groups of `--size` usages (default 40 of
 * 64), each group recorded at once through the worker's UsageRecorder (group commit, then the fold), one
 * group after the other. The usage pool and the fold pool have one connection each, so two backends do
 * all the work: their CPU time (user + system from /proc/<pid>/stat, pid from pg_backend_pid()) is read
 * before and after, with this process's CPU time, the wall time and the statements sent (pg.Client#query
 * calls, BEGIN and COMMIT included). The holds are placed before the measured loop, over `--accounts`
 * accounts (default 1, as the closed-loop bench's single tenant).
 * `node bench/usageGroupBench.ts --groups 40 --size 64 --accounts 1`.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      groups: { type: "string", default: "40" },
      size: { type: "string", default: "64" },
      accounts: { type: "string", default: "1" },
    },
  });
  const groups = Number(values.groups);
  const size = Number(values.size);
  const db = await createTestDatabase();
  const statements = { count: 0 };
  const usagePool = countingPool(createPool(db.url, 1, { keepOpen: 1 }), statements);
  const foldPool = countingPool(createPool(db.url, 1, { keepOpen: 1, synchronousCommit: false }), statements);
  try {
    const now = new Date();
    const accounts = await Promise.all(Array.from({ length: Number(values.accounts) }, () => createBudgetedAccount(db.pool, 1e15, now)));
    const group = async (): Promise<UsageRecordedData[]> => {
      const usages: UsageRecordedData[] = [];
      for (let i = 0; i < size; i++) {
        const accountId = accounts[i % accounts.length]!;
        const completionId = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
        const hold = await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 5_000, now });
        if (!hold.ok) throw new Error("hold refused");
        usages.push(usageEvent({ accountId, completionId, costMicroChf: 100 + i, finishedAt: now.toISOString() }).data);
      }
      return usages;
    };
    const prepared: UsageRecordedData[][] = [];
    for (let g = 0; g <= groups; g++) prepared.push(await group());
    const recorder = new UsageRecorder(usagePool, { foldPool });
    const recordGroup = async (usages: UsageRecordedData[]) => {
      const outcomes = await Promise.all(usages.map((u) => recorder.record(u, { actor: "worker" })));
      if (outcomes.some((o) => o !== "recorded")) throw new Error(`not recorded: ${outcomes.join(",")}`);
    };
    // Warm-up: connections opened, named statements prepared.
    await recordGroup(prepared[0]!);
    const usageBackend = await backendPid(usagePool);
    const foldBackend = await backendPid(foldPool);
    const ticks = await clockTicksPerSecond();
    const before = {
      usage: await processCpuMs(usageBackend, ticks),
      fold: await processCpuMs(foldBackend, ticks),
      node: process.cpuUsage(),
      at: performance.now(),
    };
    statements.count = 0;
    for (let g = 1; g <= groups; g++) await recordGroup(prepared[g]!);
    const wallMs = performance.now() - before.at;
    const sent = statements.count;
    const node = process.cpuUsage(before.node);
    const usageMs = (await processCpuMs(usageBackend, ticks))! - before.usage!;
    const foldMs = (await processCpuMs(foldBackend, ticks))! - before.fold!;
    const n = groups * size;
    const per = (ms: number) => (ms / n).toFixed(3);
    console.log(`${groups} groups of ${size} usages over ${accounts.length} account(s), one group after the other`);
    console.log(`per usage: PostgreSQL ${per(usageMs + foldMs)} ms CPU (durable half ${per(usageMs)}, fold ${per(foldMs)}),`);
    console.log(`           this process ${per((node.user + node.system) / 1000)} ms CPU, wall ${per(wallMs)} ms, ${(sent / n).toFixed(2)} statements`);
  } finally {
    await Promise.all([usagePool.end(), foldPool.end()]);
    await db.drop();
  }
}

/** `pool` whose clients count every query they send into `counter`. */
function countingPool(pool: Pool, counter: { count: number }): Pool {
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      counter.count += 1;
      return query(...args);
    };
  });
  return pool;
}

async function backendPid(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  return rows[0]!.pid;
}

await main();
