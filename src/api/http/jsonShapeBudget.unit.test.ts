import { describe, expect, it } from "vitest";
import { JsonShapeScanner } from "./jsonShapeBudget.ts";

const LIMITS = { maxDepth: 4, maxMembers: 3, maxValues: 20 };

/** Feeds `text` in chunks of `size` bytes; the first problem named. */
function scan(text: string, size = 3): string | null {
  const bytes = Buffer.from(text, "utf8");
  const scanner = new JsonShapeScanner(LIMITS);
  let problem: string | null = null;
  for (let i = 0; i < bytes.length && problem === null; i += size) problem = scanner.push(bytes.subarray(i, i + size));
  return problem;
}

describe("JsonShapeScanner", () => {
  it("lets a body within every limit through, whatever the chunking", () => {
    const body = JSON.stringify({ a: [1, 2, { b: "x,y{[" }], c: 'é\\"}{,,,', d: null });
    for (const size of [1, 2, 5, 1000]) expect(scan(body, size)).toBeNull();
  });

  it("ignores structure inside strings, escaped quotes included", () => {
    expect(scan(JSON.stringify({ a: '[[[[[[{{{,,,,,,"' }))).toBeNull();
  });

  it("names nesting deeper than the limit", () => {
    expect(scan("[[[[1]]]]")).toBeNull();
    expect(scan("[[[[[1]]]]]")).toMatch(/nested more than 4 levels/);
  });

  it("names an object with more members than the limit, not an array with as many elements", () => {
    expect(scan('{"a":1,"b":2,"c":3}')).toBeNull();
    expect(scan('{"a":1,"b":2,"c":3,"d":4}')).toMatch(/more than 3 members/);
    expect(scan("[1,2,3,4,5,6]")).toBeNull();
    expect(scan('{"a":{"x":1,"y":2},"b":{"x":1,"y":2},"c":[1,2,3,4]}')).toBeNull();
  });

  it("names a body with more values than the limit", () => {
    expect(scan(`[${"1,".repeat(18)}1]`)).toBeNull();
    expect(scan(`[${"1,".repeat(25)}1]`)).toMatch(/more than 20 JSON values/);
  });

  it("follows runs of backslashes before a quote across any chunk boundary", () => {
    // The string holds `\\"{{{{{` (an escaped backslash, an escaped quote, then braces): all inside it.
    const inside = JSON.stringify({ a: '\\"{{{{{{{{' });
    const after = `{"a":"x\\\\",${"[".repeat(5)}1${"]".repeat(5)}}`; // the string ends after an escaped backslash
    for (let size = 1; size <= 8; size++) {
      expect(scan(inside, size)).toBeNull();
      expect(scan(after, size)).toMatch(/nested more than 4 levels/);
    }
  });
});
