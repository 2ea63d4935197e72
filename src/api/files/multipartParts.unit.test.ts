import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MultipartError, multipartBoundary, multipartParts } from "./multipartParts.ts";

const LIMITS = { maxHeaderBytes: 16 * 1024, maxParts: 16 };

/** The body and boundary Node's own FormData (undici, as the openai SDK sends it) writes for `form`. */
async function serialize(form: FormData): Promise<{ body: Buffer; boundary: string }> {
  const response = new Response(form);
  const boundary = multipartBoundary(response.headers.get("content-type") ?? "");
  if (!boundary) throw new Error("no boundary");
  return { body: Buffer.from(await response.arrayBuffer()), boundary };
}

async function* piecesOf(body: Buffer, cuts: number[]): AsyncGenerator<Buffer> {
  let from = 0;
  for (const cut of [...new Set(cuts.map((c) => Math.min(c, body.length)))].sort((a, b) => a - b)) {
    if (cut > from) yield body.subarray(from, cut);
    from = Math.max(from, cut);
  }
  if (from < body.length) yield body.subarray(from);
}

type Parsed = { name: string; filename: string | null; contentType: string | null; body: Buffer };

async function parse(source: AsyncIterable<Buffer>, boundary: string): Promise<Parsed[]> {
  const parts: Parsed[] = [];
  for await (const part of multipartParts(source, boundary, LIMITS)) {
    const chunks: Buffer[] = [];
    for await (const chunk of part.body) chunks.push(chunk);
    parts.push({ name: part.name, filename: part.filename, contentType: part.contentType, body: Buffer.concat(chunks) });
  }
  return parts;
}

describe("multipartParts", () => {
  it("reads fields and a file, whatever the pieces it arrives in, byte-exactly", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2000 }), fc.array(fc.nat(2500), { maxLength: 12 }), async (bytes, cuts) => {
        const form = new FormData();
        form.append("purpose", "batch");
        form.append("file", new File([bytes], 'in "put".jsonl'));
        form.append("after", "x");
        const { body, boundary } = await serialize(form);
        const parts = await parse(piecesOf(body, cuts), boundary);
        expect(parts.map((p) => [p.name, p.filename])).toEqual([
          ["purpose", null],
          ["file", 'in "put".jsonl'],
          ["after", null],
        ]);
        expect(parts[0]?.body.toString()).toBe("batch");
        expect(parts[1]?.contentType).toBe("application/octet-stream");
        expect(Buffer.compare(parts[1]?.body ?? Buffer.alloc(0), Buffer.from(bytes))).toBe(0);
        expect(parts[2]?.body.toString()).toBe("x");
      }),
      { numRuns: 200 },
    );
  });

  it("finds a delimiter that looks like the content (CRLF and dashes inside the file)", async () => {
    const form = new FormData();
    const tricky = "a\r\n--\r\n-\r\n--x\r\n\r\n--";
    form.append("file", new File([tricky], "t.jsonl"));
    const { body, boundary } = await serialize(form);
    for (let size = 1; size < 40; size++) {
      const cuts = Array.from({ length: Math.ceil(body.length / size) }, (_, i) => i * size);
      const parts = await parse(piecesOf(body, cuts), boundary);
      expect(parts[0]?.body.toString()).toBe(tricky);
    }
  });

  it("skips a part whose body the reader leaves", async () => {
    const form = new FormData();
    form.append("skip", new File(["x".repeat(10_000)], "a"));
    form.append("purpose", "batch");
    const { body, boundary } = await serialize(form);
    const names: string[] = [];
    const values: string[] = [];
    for await (const part of multipartParts(piecesOf(body, [100, 5000]), boundary, LIMITS)) {
      names.push(part.name);
      if (part.name === "purpose") for await (const chunk of part.body) values.push(chunk.toString());
    }
    expect(names).toEqual(["skip", "purpose"]);
    expect(values.join("")).toBe("batch");
  });

  it("refuses a body cut short, a missing boundary, headers past the limit and too many parts", async () => {
    const form = new FormData();
    form.append("file", new File(["abc"], "a"));
    const { body, boundary } = await serialize(form);
    const drain = (source: AsyncIterable<Buffer>, limits = LIMITS) =>
      (async () => {
        for await (const part of multipartParts(source, boundary, limits)) for await (const _ of part.body) void _;
      })();
    await expect(drain(piecesOf(body.subarray(0, body.length - 10), []))).rejects.toBeInstanceOf(MultipartError);
    await expect(drain(piecesOf(Buffer.from("no boundary here"), []))).rejects.toBeInstanceOf(MultipartError);
    await expect(drain(piecesOf(body, []), { maxHeaderBytes: 10, maxParts: 16 })).rejects.toThrow(/headers exceed/);
    await expect(drain(piecesOf(body, []), { maxHeaderBytes: 1024, maxParts: 0 })).rejects.toThrow(/more than 0 parts/);
  });

  it("refuses a file name with a control character (raw or as %0D%0A) or a quote never closed", async () => {
    const boundary = "b0undary";
    const withDisposition = (disposition: string) =>
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n\r\nabc\r\n--${boundary}--\r\n`, "latin1");
    const drain = (body: Buffer) =>
      (async () => {
        for await (const part of multipartParts(piecesOf(body, []), boundary, LIMITS)) for await (const _ of part.body) void _;
      })();
    await expect(drain(withDisposition('form-data; name="file"; filename="a\u0000b.jsonl"'))).rejects.toThrow(/control character/);
    await expect(drain(withDisposition('form-data; name="file"; filename="a%0D%0AX-Inject: 1.jsonl"'))).rejects.toThrow(/control character/);
    // A raw CR LF inside the quotes ends the header line there: the quote is never closed.
    await expect(drain(withDisposition('form-data; name="file"; filename="a\r\nX-Inject: 1"'))).rejects.toThrow(/never closed/);
    expect((await parse(piecesOf(withDisposition('form-data; name="file"; filename="a b.jsonl"'), []), boundary))[0]!.filename).toBe("a b.jsonl");
    // Not UTF-8 (Latin-1's é, one byte 0xE9): refused, not stored as U+FFFD; the same name in UTF-8 is kept.
    await expect(drain(withDisposition('form-data; name="file"; filename="caf\u00e9.jsonl"'))).rejects.toThrow(/not valid UTF-8/);
    const utf8 = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="café \u{1F600}.jsonl"\r\n\r\nabc\r\n--${boundary}--\r\n`,
      "utf8",
    );
    expect((await parse(piecesOf(utf8, [60, 61, 62]), boundary))[0]!.filename).toBe("café \u{1F600}.jsonl");
  });

  it("reads the boundary of a Content-Type", () => {
    expect(multipartBoundary("multipart/form-data; boundary=abc")).toBe("abc");
    expect(multipartBoundary('Multipart/Form-Data; charset=utf-8; boundary="a b"')).toBe("a b");
    expect(multipartBoundary("application/json")).toBeNull();
    expect(multipartBoundary("multipart/form-data")).toBeNull();
    expect(multipartBoundary(`multipart/form-data; boundary=${"x".repeat(71)}`)).toBeNull();
  });
});
