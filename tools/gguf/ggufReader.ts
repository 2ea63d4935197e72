import { readFile } from "node:fs/promises";
import { float16BitsToFloat32 } from "./float16.ts";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GgmlType, GgufFormatError, GgufValueType } from "./ggufTypes.ts";
import type { GgmlTypeName, GgufScalar } from "./ggufTypes.ts";

export type GgufTensorInfo = { name: string; dims: number[]; type: GgmlTypeName; offset: number };

export type GgufFile = {
  version: number;
  metadata: Map<string, GgufScalar | GgufScalar[]>;
  tensors: GgufTensorInfo[];
  /** Absolute byte offset of the tensor data section. */
  dataOffset: number;
  bytes: Uint8Array;
};

const typeNames = new Map<number, string>(Object.entries(GgufValueType).map(([name, id]) => [id, name]));
const ggmlNames = new Map<number, GgmlTypeName>((Object.entries(GgmlType) as [GgmlTypeName, number][]).map(([name, id]) => [id, name]));

/** Parses a GGUF file written by this project (F32/F16 tensors only). */
export function parseGguf(bytes: Uint8Array): GgufFile {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let at = 0;
  const need = (n: number): number => {
    if (at + n > bytes.length) throw new GgufFormatError(`truncated at byte ${at}`);
    const start = at;
    at += n;
    return start;
  };
  const u32 = (): number => view.getUint32(need(4), true);
  const u64 = (): number => Number(view.getBigUint64(need(8), true));
  const str = (): string => {
    const length = u64();
    const start = need(length);
    return decoder.decode(bytes.subarray(start, start + length));
  };
  const scalar = (type: number): GgufScalar => {
    switch (typeNames.get(type)) {
      case "u8":
        return view.getUint8(need(1));
      case "i8":
        return view.getInt8(need(1));
      case "u16":
        return view.getUint16(need(2), true);
      case "i16":
        return view.getInt16(need(2), true);
      case "u32":
        return view.getUint32(need(4), true);
      case "i32":
        return view.getInt32(need(4), true);
      case "f32":
        return view.getFloat32(need(4), true);
      case "f64":
        return view.getFloat64(need(8), true);
      case "bool":
        return view.getUint8(need(1)) !== 0;
      case "u64":
        return view.getBigUint64(need(8), true);
      case "i64":
        return view.getBigInt64(need(8), true);
      case "string":
        return str();
      default:
        throw new GgufFormatError(`unknown value type ${type}`);
    }
  };

  if (u32() !== GGUF_MAGIC) throw new GgufFormatError("not a GGUF file");
  const version = u32();
  if (version !== 3) throw new GgufFormatError(`unsupported GGUF version ${version}`);
  const tensorCount = u64();
  const kvCount = u64();
  const metadata = new Map<string, GgufScalar | GgufScalar[]>();
  for (let i = 0; i < kvCount; i += 1) {
    const key = str();
    if (metadata.has(key)) throw new GgufFormatError(`duplicate metadata key ${key}`);
    const type = u32();
    if (type === GgufValueType.array) {
      const itemType = u32();
      const length = u64();
      const items: GgufScalar[] = [];
      for (let j = 0; j < length; j += 1) items.push(scalar(itemType));
      metadata.set(key, items);
    } else metadata.set(key, scalar(type));
  }
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < tensorCount; i += 1) {
    const name = str();
    const nDims = u32();
    const dims: number[] = [];
    for (let j = 0; j < nDims; j += 1) dims.push(u64());
    const typeId = u32();
    const type = ggmlNames.get(typeId);
    if (type === undefined) throw new GgufFormatError(`tensor ${name}: unsupported ggml type ${typeId}`);
    tensors.push({ name, dims, type, offset: u64() });
  }
  const alignment = Number(metadata.get("general.alignment") ?? GGUF_DEFAULT_ALIGNMENT);
  const dataOffset = at + ((alignment - (at % alignment)) % alignment);
  return { version, metadata, tensors, dataOffset, bytes };
}

export async function readGguf(path: string): Promise<GgufFile> {
  return parseGguf(new Uint8Array(await readFile(path)));
}

export function ggufTensorByteSize(info: GgufTensorInfo): number {
  return info.dims.reduce((a, b) => a * b, 1) * (info.type === "f32" ? 4 : 2);
}

/** Reads one tensor's values as float32. */
export function readGgufTensor(file: GgufFile, name: string): Float32Array {
  const info = file.tensors.find((t) => t.name === name);
  if (info === undefined) throw new GgufFormatError(`no tensor ${name}`);
  const count = info.dims.reduce((a, b) => a * b, 1);
  const start = file.dataOffset + info.offset;
  if (start + ggufTensorByteSize(info) > file.bytes.length) throw new GgufFormatError(`tensor ${name} runs past the end`);
  const view = new DataView(file.bytes.buffer, file.bytes.byteOffset + start);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i += 1) {
    out[i] = info.type === "f32" ? view.getFloat32(i * 4, true) : float16BitsToFloat32(view.getUint16(i * 2, true));
  }
  return out;
}
