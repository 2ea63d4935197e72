/** One line of a JSONL file: its 1-based number, and its text (null when longer than the limit). */
export type JsonlLine = { line: number; text: string | null };

/**
 * The lines of a streamed file, one at a time: only the current line is held (at most `maxLineBytes`; a
 * longer line is skipped to its end and given as `text: null`). A final line without a newline counts.
 */
export async function* jsonlLines(chunks: AsyncIterable<Buffer | Uint8Array | string>, maxLineBytes: number): AsyncGenerator<JsonlLine> {
  let parts: Buffer[] = [];
  let size = 0;
  let tooLong = false;
  let line = 0;
  const finish = (): JsonlLine => {
    line++;
    const text = tooLong ? null : Buffer.concat(parts, size).toString("utf8").replace(/\r$/, "");
    parts = [];
    size = 0;
    tooLong = false;
    return { line, text };
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
