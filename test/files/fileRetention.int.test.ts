import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOMBSTONE_MS } from "../../src/api/files/fileRetentionSweeper.ts";
import { PostgresFileStore } from "../../src/api/files/postgresFileStore.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
const ACCOUNT = "00000000-0000-4000-8000-000000000001";

const SWEEP = { abandonedAfterMs: 3600_000, tombstoneMs: TOMBSTONE_MS, maxTombstones: 100 };

async function* pieces(...parts: string[]): AsyncGenerator<Buffer> {
  for (const part of parts) yield Buffer.from(part);
}

beforeAll(async () => {
  db = await createTestDatabase();
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

describe("PostgresFileStore retention and failures", () => {
  it("sweeps expired files (FILES_RETENTION_DAYS), abandoned uploads and unfinished deletions, a bounded number per run", async () => {
    let now = new Date("2030-01-01T00:00:00Z");
    const store = new PostgresFileStore({ pool: db.pool, clock: { now: () => now }, retentionDays: 30, chunkBytes: 4 });
    const kept = new PostgresFileStore({ pool: db.pool, clock: { now: () => now }, retentionDays: 0, chunkBytes: 4 });
    const expiring = await store.create({
      accountId: ACCOUNT,
      purpose: "batch_output",
      filename: "out.jsonl",
      content: pieces("a\nb\n", "c"),
      maxBytes: 100,
      maxLines: 10,
    });
    expect(expiring).toMatchObject({ bytes: 5, lines: 3, expiresAt: new Date("2030-01-31T00:00:00Z") });
    const forever = await kept.create({ accountId: ACCOUNT, purpose: "batch", filename: "in.jsonl", content: pieces("x\n"), maxBytes: 100, maxLines: 10 });
    expect(forever.expiresAt).toBeNull();
    // An upload a process left behind (it died part-way): invisible, removed after an hour.
    await db.pool.query(
      "INSERT INTO files (id, account_id, purpose, filename, status, created_at) VALUES ('file-abandoned', $1, 'batch', 'x', 'uploading', $2)",
      [ACCOUNT, now],
    );
    await db.pool.query("INSERT INTO file_chunks (file_id, chunk_index, content) VALUES ('file-abandoned', 0, 'abc')");

    expect(await store.sweep({ ...SWEEP, maxFiles: 10 })).toEqual({ purged: 0, tombstonesRemoved: 0 });
    now = new Date("2030-01-31T00:00:01Z");
    expect(await store.sweep({ ...SWEEP, maxFiles: 1 })).toEqual({ purged: 1, tombstonesRemoved: 0 });
    expect(await store.sweep({ ...SWEEP, maxFiles: 10 })).toEqual({ purged: 1, tombstonesRemoved: 0 });
    expect(await store.get(ACCOUNT, expiring.id)).toBeNull();
    expect(await store.open(ACCOUNT, expiring.id)).toBeNull();
    expect(await store.get(ACCOUNT, forever.id)).not.toBeNull();
    // No content stays; the expired file's row stays a while as a tombstone (a list cursor), as does the abandoned upload's.
    const contentLeft = async () => (await db.pool.query("SELECT DISTINCT file_id FROM file_chunks")).rows.map((r) => r.file_id);
    expect(await contentLeft()).toEqual([forever.id]);
    const visible = await store.list(ACCOUNT, { limit: 10 });
    expect(visible.files.map((f) => f.id)).toEqual([forever.id]);
    expect(await store.delete(ACCOUNT, expiring.id)).toBe(false);

    now = new Date(now.getTime() + TOMBSTONE_MS - 1000);
    expect(await store.sweep({ ...SWEEP, maxFiles: 10 })).toEqual({ purged: 0, tombstonesRemoved: 0 });
    now = new Date(now.getTime() + 1000);
    expect(await store.sweep({ ...SWEEP, maxFiles: 10, maxTombstones: 1 })).toEqual({ purged: 0, tombstonesRemoved: 1 });
    expect(await store.sweep({ ...SWEEP, maxFiles: 10 })).toEqual({ purged: 0, tombstonesRemoved: 1 });
    const { rows } = await db.pool.query("SELECT id FROM files UNION ALL SELECT file_id FROM file_chunks");
    expect(rows.map((r) => r.id).sort()).toEqual([forever.id, forever.id]);
  });

  it("an expired file swept to a tombstone stays a list cursor in both orders, for its account only, until the tombstone goes", async () => {
    let now = new Date("2031-01-01T00:00:00Z");
    const store = new PostgresFileStore({ pool: db.pool, clock: { now: () => now }, retentionDays: 1, chunkBytes: 4 });
    const account = "00000000-0000-4000-8000-000000000002";
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      now = new Date(now.getTime() + 1000);
      const retention = i === 1 ? store : new PostgresFileStore({ pool: db.pool, clock: { now: () => now }, retentionDays: 0, chunkBytes: 4 });
      ids.push((await retention.create({ accountId: account, purpose: "batch", filename: `f${i}`, content: pieces("x\n"), maxBytes: 100, maxLines: 10 })).id);
    }
    const [first, middle, last] = ids as [string, string, string];
    now = new Date(now.getTime() + 86_400_000);
    expect(await store.sweep({ ...SWEEP, maxFiles: 10 })).toEqual({ purged: 1, tombstonesRemoved: 0 });
    const { rows } = await db.pool.query("SELECT status, filename FROM files WHERE id = $1", [middle]);
    expect(rows).toEqual([{ status: "deleted", filename: "" }]);
    expect((await store.list(account, { limit: 10 })).files.map((f) => f.id)).toEqual([last, first]);
    expect((await store.list(account, { limit: 10, after: middle })).files.map((f) => f.id)).toEqual([first]);
    expect((await store.list(account, { limit: 10, after: middle, order: "asc" })).files.map((f) => f.id)).toEqual([last]);
    expect(await store.list(ACCOUNT, { limit: 10, after: middle })).toEqual({ files: [], hasMore: false });
    expect(await store.list(ACCOUNT, { limit: 10, after: middle, order: "asc" })).toEqual({ files: [], hasMore: false });

    now = new Date(now.getTime() + TOMBSTONE_MS);
    expect(await store.sweep({ ...SWEEP, maxFiles: 10 })).toEqual({ purged: 0, tombstonesRemoved: 1 });
    // Gone: as any id that is no file of the account's, an empty page.
    expect(await store.list(account, { limit: 10, after: middle })).toEqual({ files: [], hasMore: false });
  });

  it("leaves nothing behind when the content fails part-way, and rethrows the content's own error", async () => {
    const store = new PostgresFileStore({ pool: db.pool, clock: { now: () => new Date() }, retentionDays: 30, chunkBytes: 4 });
    const before = await db.pool.query("SELECT count(*)::int AS n FROM file_chunks");
    async function* failing(): AsyncGenerator<Buffer> {
      yield Buffer.from("0123456789");
      throw new Error("client went away");
    }
    await expect(store.create({ accountId: ACCOUNT, purpose: "batch", filename: "f", content: failing(), maxBytes: 100, maxLines: 10 })).rejects.toThrow(
      "client went away",
    );
    await expect(
      store.create({ accountId: ACCOUNT, purpose: "batch", filename: "f", content: pieces("a\nb\nc\n"), maxBytes: 100, maxLines: 2 }),
    ).rejects.toThrow(/too many lines/);
    const after = await db.pool.query("SELECT count(*)::int AS n FROM file_chunks");
    expect(after.rows[0].n).toBe(before.rows[0].n);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM files WHERE status <> 'processed'")).rows[0].n).toBe(0);
  });
});
