import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresFileStore } from "../../src/api/files/postgresFileStore.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
const ACCOUNT = "00000000-0000-4000-8000-000000000001";

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

    expect(await store.sweep({ maxFiles: 10, abandonedAfterMs: 3600_000 })).toBe(0);
    now = new Date("2030-01-31T00:00:01Z");
    expect(await store.sweep({ maxFiles: 1, abandonedAfterMs: 3600_000 })).toBe(1);
    expect(await store.sweep({ maxFiles: 10, abandonedAfterMs: 3600_000 })).toBe(1);
    expect(await store.get(ACCOUNT, expiring.id)).toBeNull();
    expect(await store.get(ACCOUNT, forever.id)).not.toBeNull();
    const { rows } = await db.pool.query("SELECT id FROM files UNION ALL SELECT file_id FROM file_chunks");
    expect(rows.map((r) => r.id).sort()).toEqual([forever.id, forever.id]);
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
