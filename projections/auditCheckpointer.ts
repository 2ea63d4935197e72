import type { Pool } from "../src/db/createPool.ts";
import { writeAuditCheckpoints } from "../src/ledger/audit/auditCheckpoint.ts";
import type { Logger } from "../src/observability/logger.ts";

/**
 * Writes an audit checkpoint every `intervalMs` (and once at start). Every projector instance runs one;
 * the checkpoint's advisory lock and expected stream version let only one write at a time, and a
 * window with no change writes nothing.
 */
export class AuditCheckpointer {
  readonly #pool: Pool;
  readonly #logger: Logger;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> = Promise.resolve();

  constructor(options: { pool: Pool; logger: Logger; intervalMs: number }) {
    this.#pool = options.pool;
    this.#logger = options.logger;
    this.#intervalMs = options.intervalMs;
  }

  start(): void {
    if (this.#timer || this.#intervalMs <= 0) return;
    const tick = () => {
      this.#running = this.#running.then(() => this.#checkpoint());
    };
    this.#timer = setInterval(tick, this.#intervalMs);
    this.#timer.unref();
    tick();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  async #checkpoint(): Promise<void> {
    try {
      const written = await writeAuditCheckpoints(this.#pool);
      if (written.checkpoints) this.#logger.info("audit checkpoints written", written);
    } catch (error) {
      this.#logger.warn("audit checkpoint failed", { error: error as Error });
    }
  }
}
