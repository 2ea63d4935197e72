/** GGUF value and tensor types shared by the writer and the reader. */

export const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

export const GgufValueType = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;

export type GgufScalarType = Exclude<keyof typeof GgufValueType, "array">;

export type GgufScalar = number | bigint | boolean | string;

export type GgufValue =
  | { type: Exclude<GgufScalarType, "u64" | "i64" | "bool" | "string">; value: number }
  | { type: "u64" | "i64"; value: bigint }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "array"; itemType: GgufScalarType; value: GgufScalar[] };

export type GgufMetadata = [key: string, value: GgufValue][];

/** ggml tensor types this project writes. */
export const GgmlType = { f32: 0, f16: 1 } as const;
export type GgmlTypeName = keyof typeof GgmlType;

export type GgufTensor = {
  name: string;
  /** ggml order: dims[0] is the contiguous (innermost) dimension, so a row-major [rows, cols] matrix is [cols, rows]. */
  dims: number[];
  type: GgmlTypeName;
  data: Float32Array;
};

export class GgufFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GgufFormatError";
  }
}
