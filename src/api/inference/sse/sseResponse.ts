import type { Context } from "koa";

/**
 * A server-sent event response written straight to the socket (Koa steps aside): each event is
 * `id: <seq>` + `data: <json>`, the stream ends with `data: [DONE]`. Headers go out with the first event,
 * so anything that fails before it is still an ordinary JSON error response.
 */
export class SseResponse {
  readonly #ctx: Context;
  #open = false;
  #clientGone = false;

  constructor(ctx: Context, onClientGone: () => void) {
    this.#ctx = ctx;
    ctx.res.on("close", () => {
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

  event(id: number, data: unknown): void {
    this.#ensureOpen();
    if (this.#clientGone) return;
    this.#ctx.res.write(`id: ${id}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  done(): void {
    this.#ensureOpen();
    if (this.#clientGone) return;
    this.#ctx.res.end("data: [DONE]\n\n");
  }

  #ensureOpen(): void {
    if (this.#open) return;
    this.#open = true;
    const ctx = this.#ctx;
    ctx.respond = false;
    ctx.res.statusCode = 200;
    ctx.res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
    ctx.res.setHeader("Cache-Control", "no-cache, no-transform");
    ctx.res.setHeader("Connection", "keep-alive");
    ctx.res.setHeader("X-Accel-Buffering", "no");
    // No flushHeaders(): the headers leave with the first event, in one packet.
  }
}
