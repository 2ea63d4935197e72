import { randomBytes } from "node:crypto";
import type { Pool } from "../../db/createPool.ts";
import type { Clock } from "../../runtime/clock.ts";
import type { FilePurpose, FileStore, NewFile, StoredFile } from "./fileStore.ts";
import { FileTooLargeError } from "./fileTooLargeError.ts";
import { LineCounter } from "./lineCounter.ts";

/** Content is stored in rows of this many bytes (the last one shorter). */
export const FILE_CHUNK_BYTES = 1024 * 1024;
/** Chunks removed per statement when a file is purged: each statement stays short (API statement timeout). */
const PURGE_CHUNKS_PER_STATEMENT = 16;
const FILE_ID = /^file-[A-Za-z0-9]{1,64}$/;

type FileRow = {
  id: string;
  account_id: string;
  purpose: FilePurpose;
  filename: string;
  bytes: string;
  lines: string;
  created_at: Date;
  expires_at: Date | null;
};

const COLUMNS = "id, account_id, purpose, filename, bytes, lines, created_at, expires_at";

function toStoredFile(row: FileRow): StoredFile {
  return {
    id: row.id,
    accountId: row.account_id,
    purpose: row.purpose,
    filename: row.filename,
    bytes: Number(row.bytes),
    lines: Number(row.lines),
    createdAt: row.created_at,
    expiresAt: row.expires_at,
  };
}

/** A new file id, `file-` and 24 base62 characters, as OpenAI's look. */
export function newFileId(): string {
  const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  let id = "file-";
  for (const byte of randomBytes(24)) id += alphabet[byte % 62];
  return id;
}

/** Whether `id` can be a file id at all (anything else is not found without a query). */
export function isFileId(id: string): boolean {
  return FILE_ID.test(id);
}

/**
 * FileStore in PostgreSQL: a `files` row and the content in `file_chunks` rows of FILE_CHUNK_BYTES.
 *
 * create() writes the row as `uploading` (invisible to every read), then each chunk in a statement of its
 * own as the content arrives (no transaction or pooled connection is held while waiting for the client,
 * whose pace is its own), then marks it `processed` with its counts: the file appears whole or not at
 * all. A failure part-way removes what was written; a process that died part-way leaves an `uploading`
 * row that the retention sweep (sweepFiles) removes. Memory: one chunk being filled.
 *
 * open() reads one chunk per query (keyset on the chunk index) as the reader asks: one chunk in memory.
 * delete() hides the file at once (`deleting`) and then removes its chunks a few per statement; the row
 * stays as a tombstone (`deleted`: no content, no filename) that only list() reads, as the position of
 * an `after` cursor naming it, until the retention sweep removes it (TOMBSTONE_MS after the deletion).
 */
export class PostgresFileStore implements FileStore {
  private readonly pool: Pool;
  private readonly clock: Clock;
  private readonly retentionDays: number;
  private readonly chunkBytes: number;

  constructor(deps: { pool: Pool; clock: Clock; retentionDays: number; chunkBytes?: number }) {
    this.pool = deps.pool;
    this.clock = deps.clock;
    this.retentionDays = deps.retentionDays;
    this.chunkBytes = deps.chunkBytes ?? FILE_CHUNK_BYTES;
  }

  async create(file: NewFile): Promise<StoredFile> {
    const id = newFileId();
    const createdAt = this.clock.now();
    const retainedUntil = this.retentionDays > 0 ? new Date(createdAt.getTime() + this.retentionDays * 86_400_000) : null;
    await this.pool.query(
      "INSERT INTO files (id, account_id, purpose, filename, status, created_at, expires_at) VALUES ($1, $2, $3, $4, 'uploading', $5, $6)",
      [id, file.accountId, file.purpose, file.filename, createdAt, retainedUntil],
    );
    try {
      const { bytes, lines } = await this.writeContent(id, file);
      const expiresAfter = typeof file.expiresAfterSeconds === "function" ? file.expiresAfterSeconds() : file.expiresAfterSeconds;
      const expiresAt = earliest(retainedUntil, expiresAfter === undefined ? null : new Date(createdAt.getTime() + expiresAfter * 1000));
      const { rows } = await this.pool.query<FileRow>(
        `UPDATE files SET bytes = $2, lines = $3, status = 'processed', expires_at = $4 WHERE id = $1 AND status = 'uploading' RETURNING ${COLUMNS}`,
        [id, bytes, lines, expiresAt],
      );
      const row = rows[0];
      if (!row) throw new Error(`file ${id} vanished while it was uploaded`);
      return toStoredFile(row);
    } catch (error) {
      // Best effort: what is left (the database away) is removed by the retention sweep.
      await this.purge(id).catch(() => undefined);
      throw error;
    }
  }

  private async writeContent(id: string, file: NewFile): Promise<{ bytes: number; lines: number }> {
    const counter = new LineCounter();
    let chunk = Buffer.allocUnsafe(this.chunkBytes);
    let filled = 0;
    let index = 0;
    let bytes = 0;
    const flush = async () => {
      await this.pool.query("INSERT INTO file_chunks (file_id, chunk_index, content) VALUES ($1, $2, $3)", [id, index, chunk.subarray(0, filled)]);
      index++;
      filled = 0;
      // The driver may still hold the last buffer; fill a new one.
      chunk = Buffer.allocUnsafe(this.chunkBytes);
    };
    for await (const piece of file.content) {
      const data = typeof piece === "string" ? Buffer.from(piece, "utf8") : piece;
      bytes += data.length;
      if (bytes > file.maxBytes) throw new FileTooLargeError("bytes", file.maxBytes);
      counter.push(data);
      if (counter.lines > file.maxLines) throw new FileTooLargeError("lines", file.maxLines);
      let from = 0;
      while (from < data.length) {
        const take = Math.min(this.chunkBytes - filled, data.length - from);
        chunk.set(data.subarray(from, from + take), filled);
        filled += take;
        from += take;
        if (filled === this.chunkBytes) await flush();
      }
    }
    if (filled > 0) await flush();
    return { bytes, lines: counter.lines };
  }

  async get(accountId: string, fileId: string): Promise<StoredFile | null> {
    if (!isFileId(fileId)) return null;
    const { rows } = await this.pool.query<FileRow>(`SELECT ${COLUMNS} FROM files WHERE id = $1 AND account_id = $2 AND status = 'processed'`, [
      fileId,
      accountId,
    ]);
    return rows[0] ? toStoredFile(rows[0]) : null;
  }

  async open(accountId: string, fileId: string): Promise<AsyncIterable<Buffer> | null> {
    const file = await this.get(accountId, fileId);
    if (!file) return null;
    const pool = this.pool;
    const expectedChunks = Math.ceil(file.bytes / this.chunkBytes);
    return {
      async *[Symbol.asyncIterator]() {
        let index = -1;
        let read = 0;
        for (;;) {
          const { rows } = await pool.query<{ chunk_index: number; content: Buffer }>(
            "SELECT chunk_index, content FROM file_chunks WHERE file_id = $1 AND chunk_index > $2 ORDER BY chunk_index LIMIT 1",
            [fileId, index],
          );
          const row = rows[0];
          if (!row) break;
          if (row.chunk_index !== index + 1) throw new Error(`file ${fileId}: chunk ${index + 1} is missing`);
          index = row.chunk_index;
          read++;
          yield row.content;
        }
        // Deleted while it was read: end with an error rather than a silently shorter content.
        if (read !== expectedChunks) throw new Error(`file ${fileId} was deleted while it was read`);
      },
    };
  }

  async list(
    accountId: string,
    options: { purpose?: FilePurpose; limit: number; after?: string; order?: "asc" | "desc" },
  ): Promise<{ files: StoredFile[]; hasMore: boolean }> {
    const order = options.order ?? "desc";
    const params: unknown[] = [accountId, options.purpose ?? null, options.limit + 1];
    let cursor = "";
    if (options.after !== undefined) {
      if (!isFileId(options.after)) return { files: [], hasMore: false };
      params.push(options.after);
      const op = order === "desc" ? "<" : ">";
      // The cursor's position: a file of the account's, or its tombstone (deleted since: the SDKs pass the
      // last file of a page, which their caller may have deleted). Anything else gives an empty page.
      cursor = `AND (created_at, id) ${op} (SELECT created_at, id FROM files WHERE id = $4 AND account_id = $1 AND status <> 'uploading')`;
    }
    const direction = order === "desc" ? "DESC" : "ASC";
    const { rows } = await this.pool.query<FileRow>(
      `SELECT ${COLUMNS} FROM files
        WHERE account_id = $1 AND status = 'processed' AND ($2::text IS NULL OR purpose = $2) ${cursor}
        ORDER BY created_at ${direction}, id ${direction} LIMIT $3`,
      params,
    );
    return { files: rows.slice(0, options.limit).map(toStoredFile), hasMore: rows.length > options.limit };
  }

  async delete(accountId: string, fileId: string): Promise<boolean> {
    if (!isFileId(fileId)) return false;
    const { rowCount } = await this.pool.query(
      "UPDATE files SET status = 'deleting', deleted_at = $3 WHERE id = $1 AND account_id = $2 AND status = 'processed'",
      [fileId, accountId, this.clock.now()],
    );
    if (rowCount === 0) return false;
    // Hidden already; what a failure leaves is finished by the retention sweep.
    await this.purge(fileId, "tombstone").catch(() => undefined);
    return true;
  }

  /**
   * The retention sweep, one bounded run: expired files and uploads abandoned (no process finishes
   * them: older than `abandonedAfterMs`) are hidden, then they and deletions left unfinished are
   * purged to tombstones, at most `maxFiles` of them; then at most `maxTombstones` tombstones deleted
   * `tombstoneMs` ago or earlier are removed. Returns how many files were purged and tombstones removed.
   */
  async sweep(options: { maxFiles: number; abandonedAfterMs: number; tombstoneMs: number; maxTombstones: number }): Promise<{
    purged: number;
    tombstonesRemoved: number;
  }> {
    const now = this.clock.now();
    await this.pool.query(
      `UPDATE files SET status = 'deleting', deleted_at = $1 WHERE id IN (
         (SELECT id FROM files WHERE status = 'processed' AND expires_at <= $1 ORDER BY expires_at LIMIT $3)
         UNION ALL
         (SELECT id FROM files WHERE status = 'uploading' AND created_at <= $2 ORDER BY created_at LIMIT $3))`,
      [now, new Date(now.getTime() - options.abandonedAfterMs), options.maxFiles],
    );
    const { rows } = await this.pool.query<{ id: string }>("SELECT id FROM files WHERE status = 'deleting' ORDER BY created_at LIMIT $1", [options.maxFiles]);
    for (const { id } of rows) await this.purge(id, "tombstone");
    // Tombstones hold no content: one short statement removes many.
    const removed = await this.pool.query(
      `DELETE FROM files WHERE id IN (
         SELECT id FROM files WHERE status = 'deleted' AND deleted_at <= $1 ORDER BY deleted_at LIMIT $2)
       AND status = 'deleted'`,
      [new Date(now.getTime() - options.tombstoneMs), options.maxTombstones],
    );
    return { purged: rows.length, tombstonesRemoved: removed.rowCount ?? 0 };
  }

  /**
   * Removes a file's chunks a few per statement, then its row, or (`tombstone`, a file hidden as
   * `deleting`) leaves the row as a tombstone: `deleted`, no filename.
   */
  private async purge(fileId: string, keep?: "tombstone"): Promise<void> {
    for (;;) {
      const { rowCount } = await this.pool.query(
        `DELETE FROM file_chunks WHERE file_id = $1 AND chunk_index IN (
           SELECT chunk_index FROM file_chunks WHERE file_id = $1 ORDER BY chunk_index LIMIT $2)`,
        [fileId, PURGE_CHUNKS_PER_STATEMENT],
      );
      if ((rowCount ?? 0) < PURGE_CHUNKS_PER_STATEMENT) break;
    }
    if (keep === "tombstone") {
      // deleted_at is set when the file is hidden; a row hidden by an older version has none yet.
      await this.pool.query("UPDATE files SET status = 'deleted', filename = '', deleted_at = COALESCE(deleted_at, $2) WHERE id = $1 AND status = 'deleting'", [
        fileId,
        this.clock.now(),
      ]);
    } else {
      await this.pool.query("DELETE FROM files WHERE id = $1", [fileId]);
    }
  }
}

/** The earlier of two expiries (null: none). */
function earliest(a: Date | null, b: Date | null): Date | null {
  if (a === null) return b;
  if (b === null) return a;
  return a.getTime() <= b.getTime() ? a : b;
}
