import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool } from "../../src/db/createPool.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const backendPids = async (pool: ReturnType<typeof createPool>, n: number): Promise<number[]> => {
  // n queries at once, each holding its connection a moment, so the pool opens n connections.
  const rows = await Promise.all(Array.from({ length: n }, () => pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid, pg_sleep(0.05)")));
  return rows.map((r) => r.rows[0]!.pid);
};

describe("createPool", () => {
  it("keeps `keepOpen` connections open when idle and closes the rest", async () => {
    const pool = createPool(db.url, 5, { idleTimeoutMs: 100 });
    try {
      const opened = await backendPids(pool, 4);
      expect(new Set(opened).size).toBe(4);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(pool.totalCount).toBe(2);
      // The kept connections serve the next queries: no new backend after the quiet spell.
      const after = await backendPids(pool, 2);
      for (const pid of after) expect(opened).toContain(pid);
    } finally {
      await pool.end();
    }
  });

  it("closes every idle connection with keepOpen 0", async () => {
    const pool = createPool(db.url, 5, { idleTimeoutMs: 100, keepOpen: 0 });
    try {
      await backendPids(pool, 3);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(pool.totalCount).toBe(0);
    } finally {
      await pool.end();
    }
  });
});
