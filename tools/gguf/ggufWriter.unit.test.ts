import { describe, expect, it } from "vitest";
import { float16BitsToFloat32, float32ToFloat16Bits } from "./float16.ts";
import { parseGguf, readGgufTensor } from "./ggufReader.ts";
import { GgufFormatError } from "./ggufTypes.ts";
import { buildGguf } from "./ggufWriter.ts";

describe("buildGguf", () => {
  it("writes a v3 header, typed metadata, arrays and 32-byte aligned F32/F16 tensors that read back", () => {
    const a = new Float32Array([1, -2.5, 3.25]);
    const b = new Float32Array([0.5, 1, 1.5, 2, -0.25, 65504]);
    const bytes = buildGguf(
      [
        ["general.architecture", { type: "string", value: "llama" }],
        ["x.u32", { type: "u32", value: 7 }],
        ["x.i32", { type: "i32", value: -7 }],
        ["x.f32", { type: "f32", value: 1e-5 }],
        ["x.bool", { type: "bool", value: true }],
        ["x.u64", { type: "u64", value: 1n << 40n }],
        ["x.strings", { type: "array", itemType: "string", value: ["Ġthe", "<|im_end|>", "日本"] }],
        ["x.ints", { type: "array", itemType: "i32", value: [1, 3, -6] }],
      ],
      [
        { name: "a", dims: [3], type: "f32", data: a },
        { name: "b", dims: [3, 2], type: "f16", data: b },
      ],
    );
    const view = new DataView(bytes.buffer);
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe("GGUF");
    expect(view.getUint32(4, true)).toBe(3);
    const file = parseGguf(bytes);
    expect(file.metadata.get("x.u32")).toBe(7);
    expect(file.metadata.get("x.i32")).toBe(-7);
    expect(file.metadata.get("x.f32")).toBeCloseTo(1e-5, 10);
    expect(file.metadata.get("x.bool")).toBe(true);
    expect(file.metadata.get("x.u64")).toBe(1n << 40n);
    expect(file.metadata.get("x.strings")).toEqual(["Ġthe", "<|im_end|>", "日本"]);
    expect(file.metadata.get("x.ints")).toEqual([1, 3, -6]);
    expect(file.dataOffset % 32).toBe(0);
    expect(file.tensors.map((t) => [t.name, t.dims, t.type, t.offset % 32])).toEqual([
      ["a", [3], "f32", 0],
      ["b", [3, 2], "f16", 0],
    ]);
    expect(Array.from(readGgufTensor(file, "a"))).toEqual([1, -2.5, 3.25]);
    expect(Array.from(readGgufTensor(file, "b"))).toEqual([0.5, 1, 1.5, 2, -0.25, 65504]);
    expect(bytes.length % 32).toBe(0);
  });

  it("rejects duplicate keys, out-of-range integers and shape mismatches", () => {
    expect(() =>
      buildGguf(
        [
          ["k", { type: "u32", value: 1 }],
          ["k", { type: "u32", value: 2 }],
        ],
        [],
      ),
    ).toThrow(GgufFormatError);
    expect(() => buildGguf([["k", { type: "u8", value: 256 }]], [])).toThrow(GgufFormatError);
    expect(() => buildGguf([], [{ name: "t", dims: [2, 2], type: "f32", data: new Float32Array(3) }])).toThrow(GgufFormatError);
  });
});

describe("float16", () => {
  it("rounds to nearest even and handles subnormals, infinities and NaN", () => {
    expect(float32ToFloat16Bits(1)).toBe(0x3c00);
    expect(float32ToFloat16Bits(-2)).toBe(0xc000);
    expect(float32ToFloat16Bits(65504)).toBe(0x7bff);
    expect(float32ToFloat16Bits(65520)).toBe(0x7c00);
    expect(float32ToFloat16Bits(2 ** -24)).toBe(1);
    expect(float32ToFloat16Bits(1 + 2 ** -11)).toBe(0x3c00);
    expect(float32ToFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(Number.isNaN(float16BitsToFloat32(float32ToFloat16Bits(NaN)))).toBe(true);
    for (const x of [0.1, -Math.PI, 1e-3, 6e-5, 1234.5]) {
      expect(Math.abs(float16BitsToFloat32(float32ToFloat16Bits(x)) - x)).toBeLessThanOrEqual(Math.abs(x) * 2 ** -11 + 2 ** -25);
    }
  });
});
