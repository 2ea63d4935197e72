import type { Context } from "koa";

/** What a client waits before reconnecting after a dropped stream (the SSE `retry:` field). */
const RECONNECT_MS = 2_000;

/**
 * A server-sent event response written straight to the socket (Koa steps aside): each event is
 * `id: <seq>` + `data: <json>`, the stream ends with `data: [DONE]`. Until the response is opened (by the
 * first event, or by open() once the request is admitted), anything that fails is still an ordinary JSON
 * error response. Once open, a comment line (`: keep-alive`) goes out whenever nothing was written for
 * `keepAliveMs`, so proxies and clients do not time out while the job waits in line or thinks.
 */
export class SseResponse {
  readonly #ctx: Context;
  readonly #keepAliveMs: number;
  #open = false;
  #clientGone = false;
  #ended = false;
  /** Something was written since the keep-alive timer's last tick (a flag, not a clock read per event). */
  #wrote = false;
  #keepAlive: NodeJS.Timeout | null = null;
  /** Comments that go out right after the headers, whenever the response opens (commentOnceOpen). */
  #held: string[] = [];
  /** What the opening writes (the reconnect delay, the held comments), sent with the first text written after it. */
  #preamble = "";

  constructor(ctx: Context, onClientGone: () => void, options: { keepAliveMs: number }) {
    this.#ctx = ctx;
    this.#keepAliveMs = options.keepAliveMs;
    ctx.res.on("close", () => {
      this.#stopKeepAlive();
      if (ctx.res.writableFinished) return;
      this.#clientGone = true;
      onClientGone();
    });
  }

  get opened(): boolean {
    return this.#open;
  }

  /** True once the client closed the connection before the end. */
  get clientGone(): boolean {
    return this.#clientGone;
  }

  /** Sends the headers now (and the reconnect delay), before any event. */
  open(): void {
    this.#ensureOpen();
    if (this.#preamble) this.#write("");
  }

  /** A comment line (`: text`), ignored by SSE clients: queue positions, keep-alives. */
  comment(text: string): void {
    this.#ensureOpen();
    this.#write(`: ${text}\n\n`);
  }

  /** A comment now if the response is open, else right after its headers once it opens (not at all if it never does). */
  commentOnceOpen(text: string): void {
    if (this.#open) this.comment(text);
    else this.#held.push(text);
  }

  /** One event: `id:`, then `event:` when it is named (the Responses API's event types), then `data:`. */
  event(id: number, data: unknown, name?: string): void {
    this.eventJson(id, JSON.stringify(data), name);
  }

  /** The same with `data:` given as its JSON text, written as it is (one line: JSON text has no raw newline). */
  eventJson(id: number, json: string, name?: string): void {
    this.#ensureOpen();
    this.#write(`id: ${id}\n${name ? `event: ${name}\n` : ""}data: ${json}\n\n`);
  }

  /** An event without an id (`data:` only): one a resume after the next event's id need not repeat. */
  unnamedJson(json: string): void {
    this.#ensureOpen();
    this.#write(`data: ${json}\n\n`);
  }

  /** A named event without an id (`event:` and `data:`): a notice a resume after the last id must not skip past. */
  namedJsonWithoutId(name: string, json: string): void {
    this.#ensureOpen();
    this.#write(`event: ${name}\ndata: ${json}\n\n`);
  }

  done(): void {
    this.end("data: [DONE]\n\n");
  }

  /** Ends the stream with `last` (the Responses API's streams end after their terminal event, without `[DONE]`). */
  end(last = ""): void {
    this.#ensureOpen();
    this.#stopKeepAlive();
    if (this.#clientGone || this.#ended) return;
    this.#ended = true;
    this.#ctx.res.end(this.#takePreamble() + last);
  }

  /**
   * Writes `text` (after the preamble, if the opening's has not gone out yet). No cork: Node already sends
   * the writes of one turn after the first in one writev (its socket's write completes on the next tick),
   * and OutgoingMessage.uncork() of Node 24 writes a chunked response's parts one system call each.
   */
  #write(text: string): void {
    if (this.#clientGone || this.#ended) return;
    this.#wrote = true;
    this.#ctx.res.write(this.#takePreamble() + text);
  }

  #takePreamble(): string {
    const preamble = this.#preamble;
    this.#preamble = "";
    return preamble;
  }

  #ensureOpen(): void {
    if (this.#open) return;
    this.#open = true;
    const ctx = this.#ctx;
    ctx.respond = false;
    ctx.res.statusCode = 200;
    for (const [name, value] of Object.entries(ctx.response.headers)) if (value !== undefined) ctx.res.setHeader(name, value as string | string[]);
    ctx.res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
    ctx.res.setHeader("Cache-Control", "no-store, no-transform");
    ctx.res.setHeader("X-Accel-Buffering", "no");
    // No flushHeaders(): the headers leave with the first write, in one packet and one chunk: the
    // reconnect delay, the comments held for the opening, then whatever opened it.
    let preamble = `retry: ${RECONNECT_MS}\n\n`;
    for (const text of this.#held) preamble += `: ${text}\n\n`;
    this.#preamble = preamble;
    this.#held = [];
    // Checked twice a period: a tick that finds nothing written since the one before writes a
    // keep-alive, so no silence lasts longer than keepAliveMs.
    const half = this.#keepAliveMs / 2;
    this.#keepAlive = setInterval(() => {
      if (!this.#wrote) this.#write(": keep-alive\n\n");
      this.#wrote = false;
    }, half);
    this.#keepAlive.unref();
  }

  #stopKeepAlive(): void {
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    this.#keepAlive = null;
  }
}
