import type { ClientRequest } from "node:http";
import { EngineError } from "../engine.ts";

/** Ends one phase of an exchange (see UpstreamCall.wait); the first call wins, later ones do nothing. */
export type PhaseSettle<T> = {
  readonly settled: boolean;
  done(value: T): void;
  /** A network failure: destroys the request and rejects with toError(error, phase). */
  fail(error: unknown): void;
  /** An error of our own (a delta sink's, an EngineError from the stream): destroys the request and rejects with it unchanged. */
  rethrow(error: unknown): void;
};

/**
 * One HTTP exchange with the upstream: its timeout, its abort (by the caller's signal, by the timeout,
 * or by the engine closing), which destroys the request carrying it in every phase, including the
 * drain after the answer, and the translation of what node:http reports into the error the Engine
 * contract promises. No AbortController per call: the three abort sources call #abort directly, which
 * is all the bookkeeping an exchange needs.
 */
export class UpstreamCall {
  readonly #userSignal: AbortSignal;
  readonly #timeoutMs: number;
  #timer: NodeJS.Timeout | undefined = undefined;
  #timedOut = false;
  #closed = false;
  #aborted = false;
  #disposed = false;
  #request: ClientRequest | undefined = undefined;
  /** Rejects the phase now waiting, if any (see wait). */
  #interrupt: (() => void) | undefined = undefined;
  readonly #onUserAbort = (): void => this.#abort();

  constructor(userSignal: AbortSignal, timeoutMs: number) {
    this.#userSignal = userSignal;
    this.#timeoutMs = timeoutMs;
    if (!userSignal.aborted) userSignal.addEventListener("abort", this.#onUserAbort, { once: true });
  }

  get aborted(): boolean {
    return this.#aborted || this.#userSignal.aborted;
  }

  /** Starts the timeout, or restarts it: call before connecting and after every read. */
  touch(): void {
    // A drained body may still deliver a chunk after the call was released: no timer to re-arm then.
    if (this.#disposed) return;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timedOut = true;
        this.#abort();
      }, this.#timeoutMs);
    } else {
      this.#timer.refresh();
    }
  }

  /** The engine is closing: ends this exchange, which then fails as unavailable. */
  close(): void {
    this.#closed = true;
    this.#abort();
  }

  /** The request now carrying the exchange (a retry replaces it): destroyed when the call aborts. */
  attach(request: ClientRequest): void {
    this.#request = request;
    if (this.aborted) request.destroy();
  }

  dispose(): void {
    this.#disposed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#userSignal.removeEventListener("abort", this.#onUserAbort);
  }

  /** Throws the caller's abort reason if the caller aborted. */
  throwIfAborted(): void {
    if (this.#userSignal.aborted) throw abortReason(this.#userSignal);
  }

  /**
   * Waits for one phase of the exchange (the response headers, a body): `run` wires the request's and
   * response's events to the settle functions. Rejects at once when the call aborts, whatever the
   * socket does next, so an abort never waits for node:http's own teardown events.
   */
  wait<T>(phase: "connect" | "stream", run: (settle: PhaseSettle<T>) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const finish = (): boolean => {
        if (settled) return false;
        settled = true;
        this.#interrupt = undefined;
        return true;
      };
      const settle: PhaseSettle<T> = {
        get settled() {
          return settled;
        },
        done: (value) => {
          if (finish()) resolve(value);
        },
        fail: (error) => {
          if (!finish()) return;
          this.#request?.destroy();
          reject(this.toError(error, phase));
        },
        rethrow: (error) => {
          if (!finish()) return;
          this.#request?.destroy();
          reject(error);
        },
      };
      this.#interrupt = () => settle.fail(new Error("aborted"));
      if (this.aborted) settle.fail(new Error("aborted"));
      else run(settle);
    });
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

  #abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#request?.destroy();
    this.#interrupt?.();
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** node:http errors carry the socket's code (`connect ECONNREFUSED 127.0.0.1:8000`, `socket hang up` + ECONNRESET). */
function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  if (typeof code === "string" && !error.message.includes(code)) return `${error.message}: ${code}`;
  return error.message;
}
