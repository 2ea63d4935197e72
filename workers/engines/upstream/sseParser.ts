/** One dispatched server-sent event. */
export type SseEvent = { event: string; data: string; id: string | undefined };

/** Told of each dispatched event as it is parsed: its type (`message` unless named), its data, the last event id. */
export type SseSink = (event: string, data: string, id: string | undefined) => void;

/**
 * Incremental text/event-stream parser (the WHATWG "server-sent events" parsing rules), fed raw bytes
 * exactly as they come off the socket: an event, a line, a `\r\n` pair or a multi-byte UTF-8 character
 * may be split across pushes anywhere. Handles `\n`, `\r\n` and `\r` line ends, a leading BOM, comment
 * lines (`: keep-alive`), multi-line `data:` (joined with `\n`), `event:` and `id:` fields.
 *
 * Lenient at the end: a last event not followed by a blank line is still dispatched by end(), since some
 * servers close right after `data: [DONE]`.
 *
 * Lines are read in place: the only string made per event is its data (a slice of the text pushed, or
 * the data lines joined), and the streaming methods (feedText, finish) hand each event to a sink
 * without an event object or array; push, pushText and end collect them into an array.
 *
 * Feed one parser either bytes (push) or text (pushText, feedText), not both.
 */
export class SseParser {
  readonly #decoder = new TextDecoder("utf-8");
  /** The longest line, and the longest event's data, read (characters): past it, SseTooLongError. */
  readonly #maxChars: number;
  /** The start of a line not ended yet (normally ""). */
  #rest = "";
  /** The data of the event being read, its lines joined with `\n`; null until its first data line. */
  #data: string | null = null;
  #event = "";
  #id: string | undefined = undefined;
  #textStarted = false;

  constructor(options: { maxChars?: number } = {}) {
    this.#maxChars = options.maxChars ?? MAX_EVENT_CHARS;
  }

  push(bytes: Uint8Array): SseEvent[] {
    const events: SseEvent[] = [];
    this.#feed(this.#decoder.decode(bytes, { stream: true }), false, collectInto(events));
    return events;
  }

  /**
   * Text already decoded with characters kept whole, as a node:http response with setEncoding("utf8")
   * delivers it: its StringDecoder costs about a third of a streaming TextDecoder per chunk. A leading
   * BOM is dropped here, as the TextDecoder of push() does.
   */
  pushText(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    this.feedText(text, collectInto(events));
    return events;
  }

  /** pushText, each event handed to `sink` as it is parsed. */
  feedText(text: string, sink: SseSink): void {
    if (!this.#textStarted && text !== "") {
      this.#textStarted = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.#feed(text, false, sink);
  }

  /** The body ended: flushes a trailing line and a last undispatched event. */
  end(): SseEvent[] {
    const events: SseEvent[] = [];
    this.finish(collectInto(events));
    return events;
  }

  /** end(), each event handed to `sink`. */
  finish(sink: SseSink): void {
    this.#feed(this.#decoder.decode(), true, sink);
    const rest = this.#rest;
    if (rest !== "") {
      this.#rest = "";
      this.#line(rest, 0, rest.length, sink);
    }
    this.#line("", 0, 0, sink);
  }

  #feed(text: string, final: boolean, sink: SseSink): void {
    // More of a line not ended yet (no line end in `text`, nor a `\r` waiting for its `\n`): kept without
    // scanning the line again (a line of megabytes, a read at a time, was scanned whole at every read).
    const rest = this.#rest;
    if (rest !== "" && !final && rest.charCodeAt(rest.length - 1) !== 0x0d && text.indexOf("\n") === -1 && text.indexOf("\r") === -1) {
      this.#rest = rest + text;
      if (this.#rest.length > this.#maxChars) throw new SseTooLongError(this.#maxChars);
      return;
    }
    const buffer = rest === "" ? text : rest + text;
    const length = buffer.length;
    let start = 0;
    // The next `\n` and `\r` at or after `start`; -1 once there is none left (most streams have no `\r`), -2 not looked for yet.
    let lf = -2;
    let cr = -2;
    while (start < length) {
      if (lf !== -1 && lf < start) lf = buffer.indexOf("\n", start);
      if (cr !== -1 && cr < start) cr = buffer.indexOf("\r", start);
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        // A lone `\r` at the very end may be the first half of a `\r\n` split across pushes: wait for more.
        if (cr === length - 1 && !final) break;
        end = cr;
        next = cr + 1 === lf ? lf + 1 : cr + 1;
      } else if (lf !== -1) {
        end = lf;
        next = lf + 1;
      } else {
        break;
      }
      this.#line(buffer, start, end, sink);
      start = next;
    }
    this.#rest = start === 0 ? buffer : start >= length ? "" : buffer.slice(start);
    if (this.#rest.length > this.#maxChars) throw new SseTooLongError(this.#maxChars);
  }

  /** The line `text[start, end)`. */
  #line(text: string, start: number, end: number, sink: SseSink): void {
    if (start === end) {
      if (this.#data !== null) sink(this.#event === "" ? "message" : this.#event, this.#data, this.#id);
      this.#data = null;
      this.#event = "";
      return;
    }
    if (text.charCodeAt(start) === 0x3a /* ":" comment */) return;
    let colon = start;
    while (colon < end && text.charCodeAt(colon) !== 0x3a) colon++;
    let valueStart = colon === end ? end : colon + 1;
    if (valueStart < end && text.charCodeAt(valueStart) === 0x20) valueStart++;
    const fieldLength = colon - start;
    if (fieldLength === 4 && text.startsWith("data", start)) {
      const value = text.slice(valueStart, end);
      this.#data = this.#data === null ? value : `${this.#data}\n${value}`;
      if (this.#data.length > this.#maxChars) throw new SseTooLongError(this.#maxChars);
    } else if (fieldLength === 5 && text.startsWith("event", start)) {
      this.#event = text.slice(valueStart, end);
    } else if (fieldLength === 2 && text.startsWith("id", start)) {
      const value = text.slice(valueStart, end);
      if (!value.includes("\0")) this.#id = value;
    }
    // `retry` and unknown fields are ignored.
  }
}

/**
 * The default bound of a line and of an event's data: 8 Mi characters. A chunk of an engine's stream is
 * a token or a few; an upstream writing one endless line (50 MB, no line end) took the worker's
 * process from 280 to 945 MB.
 */
export const MAX_EVENT_CHARS = 8 * 1024 * 1024;

/** A line or an event's data longer than the parser reads. */
export class SseTooLongError extends Error {
  constructor(maxChars: number) {
    super(`upstream sent a server-sent event line or event longer than ${maxChars} characters`);
    this.name = "SseTooLongError";
  }
}

function collectInto(events: SseEvent[]): SseSink {
  return (event, data, id) => {
    events.push({ event, data, id });
  };
}
