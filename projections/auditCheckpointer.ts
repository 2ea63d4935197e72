import type { Pool } from "../src/db/createPool.ts";
import { writeAuditCheckpoints } from "../src/ledger/audit/auditCheckpoint.ts";
import type { CheckpointSigner } from "../src/ledger/audit/checkpointSignature.ts";
import type { Logger } from "../src/observability/logger.ts";

/** How often the checkpointer looks for `everyEvents` uncovered events (one bounded index scan). */
const EVENT_POLL_MS = 1000;

export type AuditCheckpointerOptions = {
  pool: Pool;
  logger: Logger;
  /** Write a checkpoint of whatever changed every `intervalMs` (0: not by time). */
  intervalMs: number;
  /** Also write one as soon as this many settled events are uncovered (0: not by count). */
  everyEvents?: number;
  /** Signs every checkpoint; null or absent: checkpoints are unsigned, and the start says so. */
  signer?: CheckpointSigner | null;
  /** How often to count uncovered events when `everyEvents` is set (tests shorten it). */
  pollMs?: number;
};

/**
 * Writes an audit checkpoint every `intervalMs` (and once at start), and as soon as `everyEvents`
 * events are uncovered. Every projector instance runs one; the checkpoint's advisory lock and expected
 * stream version let only one write at a time, and a window with no change writes nothing.
 */
export class AuditCheckpointer {
  readonly #options: AuditCheckpointerOptions;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> = Promise.resolve();
  #lastTimedAt = Number.NEGATIVE_INFINITY;

  constructor(options: AuditCheckpointerOptions) {
    this.#options = options;
  }

  start(): void {
    const { intervalMs, everyEvents = 0, signer, logger } = this.#options;
    if (this.#timer || (intervalMs <= 0 && everyEvents <= 0)) return;
    if (signer) logger.info("audit checkpoints are signed", { keyId: signer.keyId });
    else
      logger.warn(
        "audit checkpoints are UNSIGNED: anyone with write access to the database can rewrite the log and its checkpoints consistently; set AUDIT_SIGNING_KEY_PATH (docs/audit.md)",
      );
    const pollMs = everyEvents > 0 ? Math.min(this.#options.pollMs ?? EVENT_POLL_MS, intervalMs > 0 ? intervalMs : Number.POSITIVE_INFINITY) : intervalMs;
    const tick = () => {
      this.#running = this.#running.then(() => this.#checkpoint());
    };
    this.#timer = setInterval(tick, pollMs);
    this.#timer.unref();
    tick();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  async #checkpoint(): Promise<void> {
    const { pool, logger, intervalMs, everyEvents = 0, signer } = this.#options;
    const now = Date.now();
    const timed = intervalMs > 0 && now - this.#lastTimedAt >= intervalMs;
    if (!timed && everyEvents <= 0) return;
    try {
      const written = await writeAuditCheckpoints(pool, { signer: signer ?? null, minEvents: timed ? 1 : everyEvents });
      if (timed) this.#lastTimedAt = now;
      if (written.checkpoints) logger.info("audit checkpoints written", written);
    } catch (error) {
      logger.warn("audit checkpoint failed", { error: error as Error });
    }
  }
}
