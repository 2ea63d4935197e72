import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LineCounter } from "./lineCounter.ts";

function count(pieces: Uint8Array[]): number {
  const counter = new LineCounter();
  for (const piece of pieces) counter.push(piece);
  return counter.lines;
}

/** The reference: split the whole content at \n, a trailing empty piece is no line. */
function reference(content: Buffer): number {
  if (content.length === 0) return 0;
  const parts = content.toString("latin1").split("\n");
  return parts[parts.length - 1] === "" ? parts.length - 1 : parts.length;
}

describe("LineCounter", () => {
  it("counts lines with and without a final newline, and empty lines", () => {
    expect(count([])).toBe(0);
    expect(count([Buffer.from("")])).toBe(0);
    expect(count([Buffer.from("a")])).toBe(1);
    expect(count([Buffer.from("a\n")])).toBe(1);
    expect(count([Buffer.from("a\nb")])).toBe(2);
    expect(count([Buffer.from("\n\n")])).toBe(2);
    expect(count([Buffer.from("a\r\nb\r\n")])).toBe(2);
  });

  it("counts a newline at a piece boundary once, and an empty last piece changes nothing", () => {
    expect(count([Buffer.from("a"), Buffer.from("\n"), Buffer.from("b")])).toBe(2);
    expect(count([Buffer.from("a\n"), Buffer.from("")])).toBe(1);
    expect(count([Buffer.from("a"), Buffer.from("")])).toBe(1);
    expect(count([Buffer.from("a\n"), Buffer.from("b\n")])).toBe(2);
  });

  it("gives the same count however the content is cut into pieces", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(300), { maxLength: 8 }), (bytes, cuts) => {
        const content = Buffer.from(bytes.map((b) => (b % 4 === 0 ? 0x0a : b)));
        const points = [...new Set(cuts.map((c) => Math.min(c, content.length)))].sort((a, b) => a - b);
        const pieces: Buffer[] = [];
        let from = 0;
        for (const point of [...points, content.length]) {
          pieces.push(content.subarray(from, point));
          from = point;
        }
        expect(count(pieces)).toBe(reference(content));
      }),
    );
  });
});
