/**
 * One line of a JSONL file: its 1-based number, and its text (null when longer than the limit, or not
 * UTF-8: `problem` says which).
 */
export type JsonlLine = { line: number; text: string; problem?: undefined } | { line: number; text: null; problem: "too_long" | "not_utf8" };

/** Decodes strictly: a byte sequence that is not UTF-8 is refused rather than turned into U+FFFD. */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The lines of a streamed file, one at a time: only the current line is held (at most `maxLineBytes`; a
 * longer line is skipped to its end and given as `text: null`). A final line without a newline counts. A
 * byte order mark opening the file (as Windows editors write) is not part of its first line.
 */
export async function* jsonlLines(chunks: AsyncIterable<Buffer | Uint8Array | string>, maxLineBytes: number): AsyncGenerator<JsonlLine> {
  let parts: Buffer[] = [];
  let size = 0;
  let tooLong = false;
  let line = 0;
  const finish = (): JsonlLine => {
    line++;
    const bytes = tooLong ? null : Buffer.concat(parts, size);
    parts = [];
    size = 0;
    tooLong = false;
    if (bytes === null) return { line, text: null, problem: "too_long" };
    let text: string;
    try {
      text = UTF8.decode(bytes);
    } catch {
      return { line, text: null, problem: "not_utf8" };
    }
    if (line === 1 && text.startsWith("\uFEFF")) text = text.slice(1);
    return { line, text: text.replace(/\r$/, "") };
  };
  for await (const chunk of chunks) {
    let buffer = typeof chunk === "string" ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    for (;;) {
      const newline = buffer.indexOf(0x0a);
      const piece = newline === -1 ? buffer : buffer.subarray(0, newline);
      if (!tooLong) {
        if (size + piece.length > maxLineBytes) {
          tooLong = true;
          parts = [];
          size = 0;
        } else if (piece.length > 0) {
          parts.push(Buffer.from(piece));
          size += piece.length;
        }
      }
      if (newline === -1) break;
      yield finish();
      buffer = buffer.subarray(newline + 1);
    }
  }
  if (size > 0 || tooLong) yield finish();
}
