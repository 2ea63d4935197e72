/** One SSE event or comment as a client reads it. */
export type SseItem = { id?: string; data?: string; comment?: string; retry?: string };

/**
 * Reads a streaming response block by block (blank-line separated), so a test can stop in the middle
 * (abort the request) as a client whose connection drops.
 */
export class SseReader {
  readonly response: Response;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder = new TextDecoder();
  #buffer = "";

  constructor(response: Response) {
    this.response = response;
    if (!response.body) throw new Error("no body");
    this.#reader = response.body.getReader();
  }

  /** The next block, or null at the end of the stream. */
  async next(): Promise<SseItem | null> {
    for (;;) {
      const end = this.#buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        const item: SseItem = {};
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) item.id = line.slice(4);
          else if (line.startsWith("data: ")) item.data = line.slice(6);
          else if (line.startsWith("retry: ")) item.retry = line.slice(7);
          else if (line.startsWith(": ")) item.comment = line.slice(2);
        }
        return item;
      }
      const { value, done } = await this.#reader.read();
      if (done) return null;
      this.#buffer += this.#decoder.decode(value, { stream: true });
    }
  }

  /** Every remaining block up to the end. */
  async rest(): Promise<SseItem[]> {
    const items: SseItem[] = [];
    for (let item = await this.next(); item; item = await this.next()) items.push(item);
    return items;
  }

  /** Blocks until the first event with data (comments and retry lines collected on the way). */
  async nextEvent(): Promise<{ event: SseItem | null; skipped: SseItem[] }> {
    const skipped: SseItem[] = [];
    for (let item = await this.next(); item; item = await this.next()) {
      if (item.data !== undefined) return { event: item, skipped };
      skipped.push(item);
    }
    return { event: null, skipped };
  }

  async cancel(): Promise<void> {
    await this.#reader.cancel().catch(() => undefined);
  }
}
