/** One dispatched server-sent event. */
export type SseEvent = { event: string; data: string; id: string | undefined };

/**
 * Incremental text/event-stream parser (the WHATWG "server-sent events" parsing rules), fed raw bytes
 * exactly as they come off the socket: an event, a line, a `\r\n` pair or a multi-byte UTF-8 character
 * may be split across pushes anywhere. Handles `\n`, `\r\n` and `\r` line ends, a leading BOM, comment
 * lines (`: keep-alive`), multi-line `data:` (joined with `\n`), `event:` and `id:` fields.
 *
 * Lenient at the end: a last event not followed by a blank line is still dispatched by end(), since some
 * servers close right after `data: [DONE]`.
 *
 * Feed one parser either bytes (push) or text (pushText), not both.
 */
export class SseParser {
  readonly #decoder = new TextDecoder("utf-8");
  readonly #lineEnd = /\r\n|\r|\n/g;
  #buffer = "";
  #data: string[] = [];
  #event = "";
  #id: string | undefined = undefined;
  #textStarted = false;

  push(bytes: Uint8Array): SseEvent[] {
    return this.#feed(this.#decoder.decode(bytes, { stream: true }), false);
  }

  /**
   * Text already decoded with characters kept whole, as a node:http response with setEncoding("utf8")
   * delivers it: its StringDecoder costs about a third of a streaming TextDecoder per chunk. A leading
   * BOM is dropped here, as the TextDecoder of push() does.
   */
  pushText(text: string): SseEvent[] {
    if (!this.#textStarted && text !== "") {
      this.#textStarted = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    return this.#feed(text, false);
  }

  /** The body ended: flushes a trailing line and a last undispatched event. */
  end(): SseEvent[] {
    const events = this.#feed(this.#decoder.decode(), true);
    if (this.#buffer !== "") {
      this.#line(this.#buffer, events);
      this.#buffer = "";
    }
    this.#line("", events);
    return events;
  }

  #feed(text: string, final: boolean): SseEvent[] {
    const events: SseEvent[] = [];
    const buffer = this.#buffer + text;
    const lineEnd = this.#lineEnd;
    lineEnd.lastIndex = 0;
    let start = 0;
    for (let match = lineEnd.exec(buffer); match !== null; match = lineEnd.exec(buffer)) {
      // A lone `\r` at the very end may be the first half of a `\r\n` split across pushes: wait for more.
      if (!final && match[0] === "\r" && match.index === buffer.length - 1) break;
      this.#line(buffer.slice(start, match.index), events);
      start = match.index + match[0].length;
    }
    this.#buffer = buffer.slice(start);
    return events;
  }

  #line(line: string, events: SseEvent[]): void {
    if (line === "") {
      if (this.#data.length > 0) events.push({ event: this.#event === "" ? "message" : this.#event, data: this.#data.join("\n"), id: this.#id });
      this.#data = [];
      this.#event = "";
      return;
    }
    if (line.charCodeAt(0) === 0x3a /* ":" comment */) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    if (field === "data") this.#data.push(value);
    else if (field === "event") this.#event = value;
    else if (field === "id" && !value.includes("\0")) this.#id = value;
    // `retry` and unknown fields are ignored.
  }
}
