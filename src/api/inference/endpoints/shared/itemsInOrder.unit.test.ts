import { z } from "zod";
import { describe, expect, it } from "vitest";
import { parseWith } from "../../../http/validate.ts";
import { itemsInOrder } from "./itemsInOrder.ts";

describe("itemsInOrder", () => {
  it("checks no item past the group of the first bad one (z.array checks them all), and parses a good array as z.array does", () => {
    let checked = 0;
    const item = z.number().refine((n) => {
      checked++;
      return n >= 0;
    });
    const schema = z.object({ values: itemsInOrder(item, z.array(z.unknown()).min(1)) });
    const bad = { values: [1, 2, -3, ...Array.from({ length: 10_000 }, () => -1)] };
    expect(() => parseWith(schema, bad)).toThrow("Invalid 'values[2]'");
    expect(checked).toBe(256);
    // A bad item past the first group is named at its place in the whole array.
    expect(() => parseWith(schema, { values: [...Array.from({ length: 700 }, () => 1), -1] })).toThrow("Invalid 'values[700]'");
    const long = Array.from({ length: 1_000 }, (_, i) => i);
    expect(parseWith(schema, { values: long })).toEqual({ values: long });
    checked = 0;
    expect(() => parseWith(z.object({ values: z.array(item) }), bad)).toThrow("Invalid 'values[2]'");
    expect(checked).toBe(10_003);
    expect(parseWith(schema, { values: [1, 2, 3] })).toEqual({ values: [1, 2, 3] });
    expect(() => parseWith(schema, { values: [] })).toThrow("Invalid 'values'");
    expect(() => parseWith(schema, { values: "x" })).toThrow("Invalid 'values'");
  });
});
