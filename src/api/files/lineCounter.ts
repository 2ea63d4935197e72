const NEWLINE = 0x0a;

/**
 * Counts the lines of content that arrives in pieces (a line ends at `\n`; a last line without one counts
 * too), whatever the piece boundaries: the same count as splitting the whole content at `\n`, without it.
 */
export class LineCounter {
  private newlines = 0;
  private lastByte: number | null = null;

  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    let from = 0;
    for (;;) {
      const at = bytes.indexOf(NEWLINE, from);
      if (at === -1) break;
      this.newlines++;
      from = at + 1;
    }
    this.lastByte = bytes[bytes.length - 1] ?? null;
  }

  /** Lines so far, the unfinished last one included. */
  get lines(): number {
    return this.newlines + (this.lastByte !== null && this.lastByte !== NEWLINE ? 1 : 0);
  }
}
