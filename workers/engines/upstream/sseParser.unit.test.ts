import { StringDecoder } from "node:string_decoder";
import { describe, expect, it } from "vitest";
import { SseParser, SseTooLongError, type SseEvent } from "./sseParser.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

function parseInPieces(text: string, size: number): SseEvent[] {
  const all = bytes(text);
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (let i = 0; i < all.length; i += size) events.push(...parser.push(all.subarray(i, i + size)));
  events.push(...parser.end());
  return events;
}

/** The same pieces decoded the way a node:http response with setEncoding("utf8") delivers them. */
function parseTextInPieces(text: string, size: number): SseEvent[] {
  const all = Buffer.from(text);
  const decoder = new StringDecoder("utf8");
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (let i = 0; i < all.length; i += size) events.push(...parser.pushText(decoder.write(all.subarray(i, i + size))));
  events.push(...parser.pushText(decoder.end()), ...parser.end());
  return events;
}

/** The same pieces, each event handed to a sink (feedText, finish) instead of returned in arrays. */
function feedTextInPieces(text: string, size: number): SseEvent[] {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  const sink = (event: string, data: string, id: string | undefined) => events.push({ event, data, id });
  for (let i = 0; i < text.length; i += size) parser.feedText(text.slice(i, i + size), sink);
  parser.finish(sink);
  return events;
}

describe("SseParser", () => {
  const stream =
    "\uFEFF: keep-alive\r\n\r\n" +
    'data: {"a":"grüezi 👋"}\r\n\r\n' +
    "event: error\ndata: first line\ndata:second line\n\n" +
    ": ping\n" +
    "id: 7\rdata: carriage\r\r" +
    "retry: 10\nunknown: x\ndata\n\n" +
    "data: [DONE]\n\n";
  const expected: SseEvent[] = [
    { event: "message", data: '{"a":"grüezi 👋"}', id: undefined },
    { event: "error", data: "first line\nsecond line", id: undefined },
    { event: "message", data: "carriage", id: "7" },
    { event: "message", data: "", id: "7" },
    { event: "message", data: "[DONE]", id: "7" },
  ];

  it("parses a stream with CRLF, CR and LF line ends, comments, multi-line data and fields", () => {
    expect(parseInPieces(stream, 1 << 20)).toEqual(expected);
  });

  it("gives the same events however the bytes are split (inside lines, CRLF pairs and UTF-8 characters)", () => {
    for (const size of [1, 2, 3, 5, 7, 13]) expect(parseInPieces(stream, size)).toEqual(expected);
  });

  it("gives the same events from decoded text (pushText), dropping the BOM however it is split", () => {
    for (const size of [1, 2, 3, 5, 7, 13, 1 << 20]) expect(parseTextInPieces(stream, size)).toEqual(expected);
    expect(parseTextInPieces("\uFEFFdata: x\n\n", 1)).toEqual([{ event: "message", data: "x", id: undefined }]);
  });

  it("hands the same events to a sink as it parses them (feedText, finish)", () => {
    for (const size of [1, 2, 3, 5, 7, 13, 1 << 20]) expect(feedTextInPieces(stream, size)).toEqual(expected);
    const long = `data: ${"x".repeat(5000)}\n\ndata: a\r\ndata:\r\ndata:  b\r\n\r\n`;
    const longEvents = [
      { event: "message", data: "x".repeat(5000), id: undefined },
      { event: "message", data: "a\n\n b", id: undefined },
    ];
    for (const size of [1, 64, 4999, 5006, 1 << 20]) expect(feedTextInPieces(long, size)).toEqual(longEvents);
  });

  it("dispatches a last event the server did not terminate with a blank line", () => {
    expect(parseInPieces("data: [DONE]", 4)).toEqual([{ event: "message", data: "[DONE]", id: undefined }]);
    expect(parseInPieces("data: x\r", 100)).toEqual([{ event: "message", data: "x", id: undefined }]);
  });

  it("dispatches nothing for comments and blank lines alone", () => {
    expect(parseInPieces(": a\n\n\n: b\n\n", 3)).toEqual([]);
  });

  it("refuses a line, or an event's data, longer than its bound, read a piece at a time", () => {
    const parser = new SseParser({ maxChars: 1000 });
    const events: string[] = [];
    const sink = (_event: string, data: string) => events.push(data);
    parser.feedText("data: ok\n\ndata: ", sink);
    expect(events).toEqual(["ok"]);
    expect(() => {
      for (let i = 0; i < 20; i++) parser.feedText("y".repeat(100), sink);
    }).toThrow(SseTooLongError);
    const lines = new SseParser({ maxChars: 1000 });
    expect(() => lines.feedText(`${"data: yyyyyyyyyy\n".repeat(200)}\n`, sink)).toThrow(SseTooLongError);
    // A line just within the bound, split across reads, is read whole.
    const within = new SseParser({ maxChars: 1000 });
    const read: string[] = [];
    for (const piece of ["data: ", "z".repeat(500), "z".repeat(490), "\r", "\n\n"]) within.feedText(piece, (_e, data) => read.push(data));
    expect(read).toEqual(["z".repeat(990)]);
  });
});
