import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool } from "../../src/db/createPool.ts";
import { isDatabaseUnavailable } from "../../src/db/databaseUnavailable.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

/**
 * The minimal reproduction of a lost connection: a client checked out of a pool whose backend is
 * terminated (pg_terminate_backend, as a failover or a pooler restart does). node-postgres emits
 * 'error' on the client; without a listener that is an uncaught exception and the process dies
 * (vitest reports it as an unhandled error and fails the run).
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const terminate = (pid: number) => db.pool.query("SELECT pg_terminate_backend($1)", [pid]);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a pooled client whose connection is lost", () => {
  it("survives its backend being terminated while it is idle in the checkout, and is discarded on release", async () => {
    const pool = createPool(db.url, 2, { keepOpen: 0 });
    try {
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      await terminate(pid);
      await pause(300);
      const failed = await client.query("SELECT 1").then(
        () => null,
        (error: unknown) => error,
      );
      expect(isDatabaseUnavailable(failed), String(failed)).toBe(true);
      client.release();
      expect(pool.totalCount).toBe(0);
      // The pool serves on a new connection.
      const next = await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      expect(next.rows[0]!.pid).not.toBe(pid);
    } finally {
      await pool.end();
    }
  });

  it("fails the statement that was running when its backend is terminated, and nothing else", async () => {
    const pool = createPool(db.url, 2, { keepOpen: 0 });
    try {
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      const running = client.query("SELECT pg_sleep(10)").then(
        () => null,
        (error: unknown) => error,
      );
      await pause(200);
      await terminate(pid);
      const failed = await running;
      expect(isDatabaseUnavailable(failed), String(failed)).toBe(true);
      await pause(200);
      client.release(failed as Error);
      expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    } finally {
      await pool.end();
    }
  });
});
