import { EngineError } from "../engine.ts";

/**
 * One HTTP exchange with the upstream: its AbortController (aborted by the caller's signal, by the
 * timeout, or by the engine closing) and the translation of whatever fetch throws into the error the
 * Engine contract promises.
 */
export class UpstreamCall {
  readonly #controller = new AbortController();
  readonly #userSignal: AbortSignal;
  readonly #timeoutMs: number;
  #timer: NodeJS.Timeout | undefined = undefined;
  #timedOut = false;
  #closed = false;
  readonly #onUserAbort = (): void => this.#controller.abort(this.#userSignal.reason);

  constructor(userSignal: AbortSignal, timeoutMs: number) {
    this.#userSignal = userSignal;
    this.#timeoutMs = timeoutMs;
    if (userSignal.aborted) this.#controller.abort(userSignal.reason);
    else userSignal.addEventListener("abort", this.#onUserAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Starts the timeout, or restarts it: call before connecting and after every read. */
  touch(): void {
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timedOut = true;
        this.#controller.abort(new Error("upstream timeout"));
      }, this.#timeoutMs);
    } else {
      this.#timer.refresh();
    }
  }

  /** The engine is closing: ends this exchange, which then fails as unavailable. */
  close(): void {
    this.#closed = true;
    this.#controller.abort(new Error("engine closed"));
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#userSignal.removeEventListener("abort", this.#onUserAbort);
  }

  /** Throws the caller's abort reason if the caller aborted. */
  throwIfAborted(): void {
    if (this.#userSignal.aborted) throw abortReason(this.#userSignal);
  }

  /**
   * What to reject with after `error`: the caller's abort reason when the caller aborted; otherwise an
   * EngineError: before the response started ("connect") every failure means the upstream cannot be
   * reached now (unavailable); once it streams, a failure is a broken generation (internal).
   */
  toError(error: unknown, phase: "connect" | "stream"): unknown {
    if (this.#userSignal.aborted) return abortReason(this.#userSignal);
    if (error instanceof EngineError) return error;
    if (this.#closed) return new EngineError("unavailable", "engine closed");
    if (this.#timedOut) {
      return phase === "connect"
        ? new EngineError("unavailable", `upstream did not answer within ${this.#timeoutMs} ms`)
        : new EngineError("internal", `upstream stream stalled for more than ${this.#timeoutMs} ms`);
    }
    const reason = describeNetworkError(error);
    return phase === "connect"
      ? new EngineError("unavailable", `cannot reach upstream: ${reason}`)
      : new EngineError("internal", `upstream stream failed: ${reason}`);
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** fetch throws `TypeError: fetch failed` with the socket error (ECONNREFUSED, UND_ERR_SOCKET...) as cause. */
function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  const code = typeof cause?.code === "string" ? cause.code : undefined;
  const causeMessage = typeof cause?.message === "string" ? cause.message : undefined;
  return [error.message, code ?? causeMessage].filter((part) => part !== undefined && part !== "").join(": ");
}
