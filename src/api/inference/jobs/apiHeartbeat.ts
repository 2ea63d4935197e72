import type { ApiPresence } from "../../../contracts/apiPresence.ts";
import type { LogFields, Logger } from "../../../observability/logger.ts";
import { throttledWarning } from "../../../observability/throttledWarning.ts";

/** How often an API process beats (ApiPresence); each beat holds for API_BEAT_TTL_MS. */
export const API_BEAT_INTERVAL_MS = 2_000;
/** Five intervals: a process is taken for stopped only after four beats in a row did not reach Redis. */
export const API_BEAT_TTL_MS = 10_000;

/** Announces that this API process runs, so its clients count as listening (completionListeners.ts). */
export class ApiHeartbeat {
  readonly #presence: ApiPresence;
  readonly #process: string;
  readonly #failed: (fields?: LogFields) => void;
  #timer: NodeJS.Timeout | null = null;

  constructor(options: { presence: ApiPresence; process: string; logger: Logger }) {
    this.#presence = options.presence;
    this.#process = options.process;
    this.#failed = throttledWarning(options.logger, "API heartbeat failed");
  }

  /** Beats now and every API_BEAT_INTERVAL_MS until stop(). */
  start(): void {
    if (this.#timer) return;
    const beat = () => {
      this.#presence.beat(this.#process, API_BEAT_TTL_MS).catch((error: unknown) => this.#failed({ error: error as Error }));
    };
    beat();
    this.#timer = setInterval(beat, API_BEAT_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops beating: the beat expires within API_BEAT_TTL_MS (clients still attached then resume elsewhere). */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
