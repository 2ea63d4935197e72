import { randomUUID } from "node:crypto";
import type { Pool } from "../../src/db/createPool.ts";
import type { FileStore, NewFile, StoredFile } from "../../src/api/files/fileStore.ts";

/**
 * A small PostgreSQL-backed FileStore for the Batch API's tests until the Files API's store
 * (PostgresFileStore, migration 070) is merged; then the tests use that one through `deps.files`.
 * Content is kept in chunks, read back chunk by chunk.
 */
export async function postgresTestFileStore(pool: Pool): Promise<FileStore> {
  await pool.query(`CREATE TABLE IF NOT EXISTS test_files (id text PRIMARY KEY, account_id text NOT NULL, purpose text NOT NULL, filename text NOT NULL,
    bytes bigint NOT NULL, lines integer NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE IF NOT EXISTS test_file_chunks (file_id text NOT NULL, n integer NOT NULL, data bytea NOT NULL, PRIMARY KEY (file_id, n));`);
  const toFile = (r: { id: string; account_id: string; purpose: string; filename: string; bytes: string; lines: number; created_at: Date }): StoredFile => ({
    id: r.id,
    accountId: r.account_id,
    purpose: r.purpose as StoredFile["purpose"],
    filename: r.filename,
    bytes: Number(r.bytes),
    lines: r.lines,
    createdAt: r.created_at,
    expiresAt: null,
  });
  return {
    async create(file: NewFile) {
      const id = `file-${randomUUID().replaceAll("-", "")}`;
      let bytes = 0;
      let lines = 0;
      let n = 0;
      for await (const chunk of file.content) {
        const buffer = typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk);
        bytes += buffer.length;
        for (const byte of buffer) if (byte === 0x0a) lines++;
        await pool.query("INSERT INTO test_file_chunks (file_id, n, data) VALUES ($1, $2, $3)", [id, n++, buffer]);
      }
      const row = await pool.query("INSERT INTO test_files (id, account_id, purpose, filename, bytes, lines) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *", [
        id,
        file.accountId,
        file.purpose,
        file.filename,
        bytes,
        lines,
      ]);
      return toFile(row.rows[0]);
    },
    async get(accountId, fileId) {
      const row = await pool.query("SELECT * FROM test_files WHERE id = $1 AND account_id = $2", [fileId, accountId]);
      return row.rows[0] ? toFile(row.rows[0]) : null;
    },
    async open(accountId, fileId) {
      const found = await pool.query("SELECT 1 FROM test_files WHERE id = $1 AND account_id = $2", [fileId, accountId]);
      if (!found.rowCount) return null;
      return (async function* () {
        for (let n = 0; ; n++) {
          const chunk = await pool.query<{ data: Buffer }>("SELECT data FROM test_file_chunks WHERE file_id = $1 AND n = $2", [fileId, n]);
          if (!chunk.rows[0]) return;
          yield chunk.rows[0].data;
        }
      })();
    },
    async list(accountId, options) {
      const rows = await pool.query("SELECT * FROM test_files WHERE account_id = $1 ORDER BY created_at DESC LIMIT $2", [accountId, options.limit]);
      return { files: rows.rows.map(toFile), hasMore: false };
    },
    async delete(accountId, fileId) {
      const deleted = await pool.query("DELETE FROM test_files WHERE id = $1 AND account_id = $2", [fileId, accountId]);
      await pool.query("DELETE FROM test_file_chunks WHERE file_id = $1", [fileId]);
      return (deleted.rowCount ?? 0) > 0;
    },
  };
}
