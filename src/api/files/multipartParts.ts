/** One part of a multipart/form-data body; its body must be read (or left: it is skipped) before the next part. */
export type MultipartPart = {
  name: string;
  /** The `filename` of its Content-Disposition; null for a plain field. */
  filename: string | null;
  contentType: string | null;
  body: AsyncIterable<Buffer>;
};

export class MultipartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MultipartError";
  }
}

export type MultipartLimits = {
  /** The header block of one part. */
  maxHeaderBytes: number;
  maxParts: number;
};

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");

/** The boundary of a `multipart/form-data; boundary=...` Content-Type; null when there is none. */
export function multipartBoundary(contentType: string): string | null {
  const [type, ...params] = contentType.split(";");
  if (type?.trim().toLowerCase() !== "multipart/form-data") return null;
  for (const param of params) {
    const eq = param.indexOf("=");
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== "boundary") continue;
    let value = param.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    // RFC 2046: 1 to 70 characters.
    return value.length >= 1 && value.length <= 70 ? value : null;
  }
  return null;
}

/**
 * The bytes of a source, read as they are asked for: what was received and not yet taken is kept
 * (never more than one piece of the source and a delimiter's length).
 */
class ByteReader {
  private buffer: Buffer = Buffer.alloc(0);
  private ended = false;
  private readonly source: AsyncIterator<Buffer>;
  constructor(source: AsyncIterator<Buffer>) {
    this.source = source;
  }

  get available(): Buffer {
    return this.buffer;
  }

  /** Reads one more piece; false at the end of the source. */
  async more(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.source.next();
    if (next.done) {
      this.ended = true;
      return false;
    }
    const piece = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value);
    this.buffer = this.buffer.length === 0 ? piece : Buffer.concat([this.buffer, piece]);
    return true;
  }

  /** Stops reading the source (its iterator's return: a request stream is left to its owner). */
  async close(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.source.return?.();
  }

  take(n: number): Buffer {
    const taken = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return taken;
  }
}

/**
 * Streams the parts of a multipart/form-data body (RFC 7578) from `source`, in order, each part's body as
 * it arrives: memory is bounded by the source's pieces, whatever the size of a part. The body of a part
 * ends at the next `\r\n--boundary`; a delimiter split across pieces of the source is found all the same.
 * Malformed input (no opening boundary, a header block past the limit, a body that ends before the
 * closing boundary) throws MultipartError.
 */
export async function* multipartParts(source: AsyncIterable<Buffer>, boundary: string, limits: MultipartLimits): AsyncGenerator<MultipartPart> {
  const reader = new ByteReader(source[Symbol.asyncIterator]());
  try {
    yield* readParts(reader, boundary, limits);
  } finally {
    await reader.close();
  }
}

async function* readParts(reader: ByteReader, boundary: string, limits: MultipartLimits): AsyncGenerator<MultipartPart> {
  const dashBoundary = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);

  // The preamble (usually empty) up to the first boundary, which may start the body without a CRLF.
  for (;;) {
    const buffer = reader.available;
    const at = buffer.indexOf(dashBoundary);
    if (at !== -1 && (at === 0 || (at >= 2 && buffer[at - 2] === 0x0d && buffer[at - 1] === 0x0a))) {
      reader.take(at + dashBoundary.length);
      break;
    }
    if (buffer.length > limits.maxHeaderBytes) throw new MultipartError("The multipart body does not start with its boundary.");
    if (!(await reader.more())) throw new MultipartError("The multipart body does not start with its boundary.");
  }

  for (let count = 0; ; count++) {
    // After a delimiter: `--` (the end), or optional whitespace and CRLF, then a part.
    while (reader.available.length < 2) {
      if (!(await reader.more())) throw new MultipartError("The multipart body ended before its closing boundary.");
    }
    if (reader.available[0] === 0x2d && reader.available[1] === 0x2d) return;
    if (count >= limits.maxParts) throw new MultipartError(`The multipart body has more than ${limits.maxParts} parts.`);
    const headers = await readHeaders(reader, limits.maxHeaderBytes);
    const part = partOf(headers);
    let finished = false;
    const body = async function* (): AsyncGenerator<Buffer> {
      for (;;) {
        const buffer = reader.available;
        const at = buffer.indexOf(delimiter);
        if (at !== -1) {
          if (at > 0) yield reader.take(at);
          reader.take(delimiter.length);
          finished = true;
          return;
        }
        // Everything but a tail that could be the start of the delimiter.
        const safe = buffer.length - (delimiter.length - 1);
        if (safe > 0) yield reader.take(safe);
        if (!(await reader.more())) throw new MultipartError("The multipart body ended before its closing boundary.");
      }
    };
    const iterator = body();
    let handedOut = false;
    yield {
      ...part,
      body: {
        [Symbol.asyncIterator]() {
          if (handedOut) throw new Error("a part's body can be read once");
          handedOut = true;
          return iterator;
        },
      },
    };
    // The consumer may have left the body (or part of it): skip the rest.
    if (!finished) for await (const _ of iterator) void _;
    if (!finished) throw new MultipartError("The multipart body ended before its closing boundary.");
  }
}

async function readHeaders(reader: ByteReader, maxHeaderBytes: number): Promise<Map<string, string>> {
  // The CRLF ending the boundary line (transport padding before it is allowed and ignored).
  for (;;) {
    const at = reader.available.indexOf(CRLF);
    if (at !== -1) {
      if (reader.available.subarray(0, at).toString("latin1").trim() !== "") throw new MultipartError("Malformed multipart boundary line.");
      reader.take(at + CRLF.length);
      break;
    }
    if (reader.available.length > 256) throw new MultipartError("Malformed multipart boundary line.");
    if (!(await reader.more())) throw new MultipartError("The multipart body ended before its closing boundary.");
  }
  let block: string;
  for (;;) {
    const buffer = reader.available;
    // A part without headers starts right away with the empty line.
    if (buffer.length >= 2 && buffer[0] === 0x0d && buffer[1] === 0x0a) {
      reader.take(2);
      block = "";
      break;
    }
    const at = buffer.indexOf(HEADER_END);
    if (at !== -1 && at <= maxHeaderBytes) {
      // Strictly: a byte that is not UTF-8 (a file name in Latin-1, say) is refused, not stored as U+FFFD.
      block = decodeHeaderBlock(reader.take(at));
      reader.take(HEADER_END.length);
      break;
    }
    if (buffer.length > maxHeaderBytes + HEADER_END.length) throw new MultipartError(`A multipart part's headers exceed ${maxHeaderBytes} bytes.`);
    if (!(await reader.more())) throw new MultipartError("The multipart body ended before its closing boundary.");
  }
  const headers = new Map<string, string>();
  for (const line of block.split("\r\n")) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new MultipartError("Malformed multipart part header.");
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

function decodeHeaderBlock(bytes: Buffer): string {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw new MultipartError("A multipart part's headers are not valid UTF-8 (a file name must be sent in UTF-8).");
  }
}

function partOf(headers: Map<string, string>): Omit<MultipartPart, "body"> {
  const disposition = headers.get("content-disposition");
  if (!disposition) throw new MultipartError("A multipart part has no Content-Disposition.");
  const params = dispositionParams(disposition);
  const name = params.get("name");
  if (name === undefined) throw new MultipartError("A multipart part has no name.");
  const filename = params.get("filename") ?? null;
  // A control character (NUL, CR, LF...) in a file name, sent raw or as %0D/%0A: refused, not stored
  // mangled (NUL became U+FFFD; a raw CR LF cut the header, the name kept as a stray `"a`).
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is looked for
  if (filename !== null && /[\u0000-\u001f\u007f]/.test(filename)) throw new MultipartError("A multipart part's filename has a control character.");
  return { name, filename, contentType: headers.get("content-type") ?? null };
}

/** `form-data; name="file"; filename="a.jsonl"` -> {name, filename}; quoted values unescaped as browsers and undici write them. */
function dispositionParams(value: string): Map<string, string> {
  const params = new Map<string, string>();
  const pattern = /;\s*([A-Za-z0-9_*-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/g;
  for (const match of value.matchAll(pattern)) {
    const key = (match[1] ?? "").toLowerCase();
    const quoted = match[2];
    if (quoted === undefined && match[3]?.startsWith('"')) throw new MultipartError(`A multipart part's ${key} has a quote that is never closed.`);
    const raw = quoted !== undefined ? quoted.replace(/\\(.)/g, "$1").replace(/%22/g, '"').replace(/%0D/gi, "\r").replace(/%0A/gi, "\n") : (match[3] ?? "");
    if (!params.has(key)) params.set(key, raw);
  }
  return params;
}
