import { writeFile } from "node:fs/promises";
import { float32ToFloat16Bits } from "./float16.ts";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, GgmlType, GgufFormatError, GgufValueType } from "./ggufTypes.ts";
import type { GgufMetadata, GgufScalar, GgufScalarType, GgufTensor, GgufValue } from "./ggufTypes.ts";

/** Little-endian growable byte buffer. */
class ByteSink {
  #bytes = new Uint8Array(1 << 16);
  #view = new DataView(this.#bytes.buffer);
  length = 0;
  readonly #encoder = new TextEncoder();

  #reserve(n: number): number {
    if (this.length + n > this.#bytes.length) {
      let size = this.#bytes.length * 2;
      while (size < this.length + n) size *= 2;
      const next = new Uint8Array(size);
      next.set(this.#bytes.subarray(0, this.length));
      this.#bytes = next;
      this.#view = new DataView(next.buffer);
    }
    const at = this.length;
    this.length += n;
    return at;
  }

  u8(v: number): void {
    this.#view.setUint8(this.#reserve(1), v);
  }
  i8(v: number): void {
    this.#view.setInt8(this.#reserve(1), v);
  }
  u16(v: number): void {
    this.#view.setUint16(this.#reserve(2), v, true);
  }
  i16(v: number): void {
    this.#view.setInt16(this.#reserve(2), v, true);
  }
  u32(v: number): void {
    this.#view.setUint32(this.#reserve(4), v, true);
  }
  i32(v: number): void {
    this.#view.setInt32(this.#reserve(4), v, true);
  }
  f32(v: number): void {
    this.#view.setFloat32(this.#reserve(4), v, true);
  }
  f64(v: number): void {
    this.#view.setFloat64(this.#reserve(8), v, true);
  }
  u64(v: bigint): void {
    this.#view.setBigUint64(this.#reserve(8), v, true);
  }
  i64(v: bigint): void {
    this.#view.setBigInt64(this.#reserve(8), v, true);
  }

  string(v: string): void {
    const bytes = this.#encoder.encode(v);
    this.u64(BigInt(bytes.length));
    this.#bytes.set(bytes, this.#reserve(bytes.length));
  }

  pad(alignment: number): void {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.#bytes.fill(0, this.#reserve(n), this.length);
  }

  tensorData(tensor: GgufTensor): void {
    if (tensor.type === "f32") {
      const at = this.#reserve(tensor.data.length * 4);
      for (let i = 0; i < tensor.data.length; i += 1) this.#view.setFloat32(at + i * 4, tensor.data[i]!, true);
    } else {
      const at = this.#reserve(tensor.data.length * 2);
      for (let i = 0; i < tensor.data.length; i += 1) this.#view.setUint16(at + i * 2, float32ToFloat16Bits(tensor.data[i]!), true);
    }
  }

  bytes(): Uint8Array {
    return this.#bytes.slice(0, this.length);
  }
}

function writeScalar(sink: ByteSink, type: GgufScalarType, value: GgufScalar, key: string): void {
  const fail = (): never => {
    throw new GgufFormatError(`metadata ${key}: ${String(value)} is not a valid ${type}`);
  };
  switch (type) {
    case "string":
      if (typeof value !== "string") fail();
      sink.string(value as string);
      return;
    case "bool":
      if (typeof value !== "boolean") fail();
      sink.u8(value ? 1 : 0);
      return;
    case "u64":
      if (typeof value !== "bigint" || value < 0n) fail();
      sink.u64(value as bigint);
      return;
    case "i64":
      if (typeof value !== "bigint") fail();
      sink.i64(value as bigint);
      return;
    case "f32":
    case "f64":
      if (typeof value !== "number") fail();
      if (type === "f32") sink.f32(value as number);
      else sink.f64(value as number);
      return;
    default: {
      if (typeof value !== "number" || !Number.isInteger(value)) fail();
      const limits: Record<string, [number, number]> = {
        u8: [0, 0xff],
        i8: [-0x80, 0x7f],
        u16: [0, 0xffff],
        i16: [-0x8000, 0x7fff],
        u32: [0, 0xffffffff],
        i32: [-0x80000000, 0x7fffffff],
      };
      const [min, max] = limits[type]!;
      if ((value as number) < min || (value as number) > max) fail();
      sink[type](value as number);
    }
  }
}

function writeValue(sink: ByteSink, key: string, value: GgufValue): void {
  sink.u32(GgufValueType[value.type]);
  if (value.type !== "array") {
    writeScalar(sink, value.type, value.value, key);
    return;
  }
  sink.u32(GgufValueType[value.itemType]);
  sink.u64(BigInt(value.value.length));
  for (const item of value.value) writeScalar(sink, value.itemType, item, key);
}

function tensorByteSize(tensor: GgufTensor): number {
  return tensor.data.length * (tensor.type === "f32" ? 4 : 2);
}

/**
 * Serialises a GGUF v3 file: header, metadata (in the given order), tensor infos, then the tensor
 * data, each tensor aligned to `general.alignment` (32 unless the metadata says otherwise).
 */
export function buildGguf(metadata: GgufMetadata, tensors: GgufTensor[]): Uint8Array {
  const keys = new Set<string>();
  for (const [key] of metadata) {
    if (keys.has(key)) throw new GgufFormatError(`duplicate metadata key ${key}`);
    keys.add(key);
  }
  const alignmentEntry = metadata.find(([key]) => key === "general.alignment")?.[1];
  const alignment = alignmentEntry?.type === "u32" ? alignmentEntry.value : GGUF_DEFAULT_ALIGNMENT;
  if (alignment <= 0 || alignment % 8 !== 0) throw new GgufFormatError(`bad alignment ${alignment}`);
  const names = new Set<string>();
  for (const tensor of tensors) {
    if (names.has(tensor.name)) throw new GgufFormatError(`duplicate tensor ${tensor.name}`);
    names.add(tensor.name);
    const elements = tensor.dims.reduce((a, b) => a * b, 1);
    if (tensor.dims.length < 1 || tensor.dims.length > 4 || elements !== tensor.data.length) {
      throw new GgufFormatError(`tensor ${tensor.name}: dims [${tensor.dims.join(", ")}] do not match ${tensor.data.length} values`);
    }
  }

  const sink = new ByteSink();
  sink.u32(GGUF_MAGIC);
  sink.u32(GGUF_VERSION);
  sink.u64(BigInt(tensors.length));
  sink.u64(BigInt(metadata.length));
  for (const [key, value] of metadata) {
    sink.string(key);
    writeValue(sink, key, value);
  }
  let offset = 0;
  for (const tensor of tensors) {
    sink.string(tensor.name);
    sink.u32(tensor.dims.length);
    for (const dim of tensor.dims) sink.u64(BigInt(dim));
    sink.u32(GgmlType[tensor.type]);
    sink.u64(BigInt(offset));
    offset += tensorByteSize(tensor);
    offset += (alignment - (offset % alignment)) % alignment;
  }
  sink.pad(alignment);
  for (const tensor of tensors) {
    sink.tensorData(tensor);
    sink.pad(alignment);
  }
  return sink.bytes();
}

export async function writeGguf(path: string, metadata: GgufMetadata, tensors: GgufTensor[]): Promise<number> {
  const bytes = buildGguf(metadata, tensors);
  await writeFile(path, bytes);
  return bytes.length;
}
