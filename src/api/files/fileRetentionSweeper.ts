import type { Logger } from "../../observability/logger.ts";
import type { PostgresFileStore } from "./postgresFileStore.ts";

/** How often the API sweeps, and how much one run may delete (the rest waits for the next run). */
const SWEEP_INTERVAL_MS = 60_000;
const FILES_PER_RUN = 20;
/**
 * An upload still `uploading` after this long has no process finishing it (the process died; a
 * request's body must arrive within Node's requestTimeout, 5 minutes): it is removed.
 */
const ABANDONED_UPLOAD_MS = 3600_000;
/**
 * A deleted (or expired) file's tombstone is kept this long: its id still works as a list cursor (`after`)
 * for its account, which the SDKs' auto-pagination relies on when the caller deletes the files it lists.
 * They fetch the next page at once; a day also covers a listing paged by hand or a slow cleanup.
 */
export const TOMBSTONE_MS = 86_400_000;
/** Tombstones (rows without content) removed per run: one statement. */
const TOMBSTONES_PER_RUN = 1000;

/**
 * The Files API's retention: every SWEEP_INTERVAL_MS, deletes up to FILES_PER_RUN files that expired
 * (FILES_RETENTION_DAYS), uploads abandoned by a process that died, and deletions left unfinished (their
 * content; each leaves a tombstone), and removes up to TOMBSTONES_PER_RUN tombstones older than TOMBSTONE_MS.
 * Several API processes may sweep at once: a file is purged by whichever gets to it.
 */
export class FileRetentionSweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly store: PostgresFileStore;
  private readonly logger: Logger;

  constructor(deps: { store: PostgresFileStore; logger: Logger }) {
    this.store = deps.store;
    this.logger = deps.logger;
  }

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  /** One bounded run; a failure (database away) is logged and the next run tries again. */
  runOnce(): Promise<void> {
    this.running ??= this.store
      .sweep({ maxFiles: FILES_PER_RUN, abandonedAfterMs: ABANDONED_UPLOAD_MS, tombstoneMs: TOMBSTONE_MS, maxTombstones: TOMBSTONES_PER_RUN })
      .then(({ purged, tombstonesRemoved }) => {
        if (purged > 0 || tombstonesRemoved > 0) this.logger.info("files swept", { purged, tombstonesRemoved });
      })
      .catch((error: unknown) => this.logger.warn("file retention sweep failed", { error: (error as Error).message }))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
