import { describe, expect, it } from "vitest";
import { jsonlLines } from "./jsonlLines.ts";

async function collect(chunks: string[], max = 100) {
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
      { line: 1, text: null },
      { line: 2, text: "ok" },
    ]);
  });
});
