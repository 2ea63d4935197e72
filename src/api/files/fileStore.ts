/**
 * The contract between the Files API and its users (the Batch API reads input files and writes output and
 * error files through it). Contents are streamed in and out, never held whole in memory. The default
 * implementation keeps files in PostgreSQL in chunks; an S3-compatible store can implement the same
 * interface. Every call is scoped to an account: a file of another account is not found (null / false).
 */

/** OpenAI's file purposes this platform stores: `batch` (uploaded input), `batch_output` (results and errors it writes). */
export type FilePurpose = "batch" | "batch_output";

/** A stored file's metadata, as OpenAI's file object shows it (see toFileObject). */
export type StoredFile = {
  id: string;
  accountId: string;
  purpose: FilePurpose;
  filename: string;
  bytes: number;
  /** Number of lines (JSONL), counted while the content was stored. */
  lines: number;
  createdAt: Date;
  /** When retention deletes it; null: kept until deleted. */
  expiresAt: Date | null;
};

export type NewFile = {
  accountId: string;
  purpose: FilePurpose;
  filename: string;
  /** The content, read once, in order. */
  content: AsyncIterable<Buffer | Uint8Array | string>;
  /** Refuse (and store nothing) past this many bytes / lines: FileTooLargeError. */
  maxBytes: number;
  maxLines: number;
  /**
   * Expires this long after it is created (OpenAI's `expires_after`, anchor created_at), or with the
   * retention if that comes first. A function is asked once the content is read: an upload's form may
   * carry the field after the file.
   */
  expiresAfterSeconds?: number | (() => number | undefined);
};

export interface FileStore {
  /** Stores the whole content or nothing (a failure part-way leaves no file behind). */
  create(file: NewFile): Promise<StoredFile>;
  get(accountId: string, fileId: string): Promise<StoredFile | null>;
  /** The content in order, chunk by chunk; null when the account has no such file. */
  open(accountId: string, fileId: string): Promise<AsyncIterable<Buffer> | null>;
  /**
   * Newest first (or oldest: `order`); `after` is a file id (cursor) of the previous page, also once that
   * file was deleted (for a while: the store keeps its position), so deleting while listing misses none.
   */
  list(
    accountId: string,
    options: { purpose?: FilePurpose; limit: number; after?: string; order?: "asc" | "desc" },
  ): Promise<{ files: StoredFile[]; hasMore: boolean }>;
  /**
   * Deletion of the content and the metadata (every read but a list cursor finds nothing); false when the
   * account has no such file (also when deleted already).
   */
  delete(accountId: string, fileId: string): Promise<boolean>;
}
