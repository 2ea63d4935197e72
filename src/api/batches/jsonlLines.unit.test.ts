import { describe, expect, it } from "vitest";
import { jsonlLines } from "./jsonlLines.ts";

async function collect(chunks: (string | Buffer)[], max = 100) {
  const out = [];
  for await (const line of jsonlLines(
    (async function* () {
      yield* chunks;
    })(),
    max,
  ))
    out.push(line);
  return out;
}

describe("jsonlLines", () => {
  it("splits lines across chunk boundaries, numbers them from 1 and keeps a last line without a newline", async () => {
    expect(await collect(['{"a":', '1}\n{"b"', ":2}\r\n\n", '{"c":3}'])).toEqual([
      { line: 1, text: '{"a":1}' },
      { line: 2, text: '{"b":2}' },
      { line: 3, text: "" },
      { line: 4, text: '{"c":3}' },
    ]);
  });

  it("gives a line longer than the limit as null without holding it, and goes on after it", async () => {
    expect(await collect(["x".repeat(8), "y".repeat(8), "\nok\n"], 10)).toEqual([
      { line: 1, text: null, problem: "too_long" },
      { line: 2, text: "ok" },
    ]);
  });

  it("refuses a line that is not UTF-8 (not turned into U+FFFD), keeps a character split across chunks, and goes on", async () => {
    const euro = Buffer.from('{"p":"\u20ac"}\n');
    expect(await collect([Buffer.from('{"id":"a\xff"}\n', "latin1"), euro.subarray(0, 7), euro.subarray(7), Buffer.from([0x7b, 0xc3, 0x0a])])).toEqual([
      { line: 1, text: null, problem: "not_utf8" },
      { line: 2, text: '{"p":"\u20ac"}' },
      { line: 3, text: null, problem: "not_utf8" },
    ]);
  });

  it("drops a byte order mark opening the file, and keeps one anywhere else", async () => {
    expect(await collect(["\uFEFF{}\n\uFEFF{}\n"])).toEqual([
      { line: 1, text: "{}" },
      { line: 2, text: "\uFEFF{}" },
    ]);
  });
});
