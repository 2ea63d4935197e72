import { GgufFormatError } from "./ggufTypes.ts";
import type { GgufScalar } from "./ggufTypes.ts";
import { ggufTensorByteSize } from "./ggufReader.ts";
import type { GgufFile } from "./ggufReader.ts";

/**
 * Checks what would otherwise crash or confuse llama.cpp: duplicate token strings, merges that
 * name unknown tokens, special ids out of range, tensor shapes that disagree with the
 * hyperparameters, overlapping or misaligned tensor data. Throws GgufFormatError on the first problem.
 */
export function validateLlamaGguf(file: GgufFile): void {
  const fail = (message: string): never => {
    throw new GgufFormatError(message);
  };
  const get = (key: string): GgufScalar | GgufScalar[] => file.metadata.get(key) ?? fail(`missing metadata ${key}`);
  const num = (key: string): number => {
    const value = get(key);
    return typeof value === "number" ? value : fail(`metadata ${key} is not a number`);
  };
  const strings = (key: string): string[] => {
    const value = get(key);
    return Array.isArray(value) && value.every((v) => typeof v === "string") ? (value as string[]) : fail(`metadata ${key} is not a string array`);
  };
  if (get("general.architecture") !== "llama") fail("general.architecture is not llama");
  if (get("tokenizer.ggml.model") !== "gpt2") fail("tokenizer.ggml.model is not gpt2");

  const tokens = strings("tokenizer.ggml.tokens");
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.length === 0) fail("empty token string");
    if (seen.has(token)) fail(`duplicate token ${JSON.stringify(token)}`);
    seen.add(token);
  }
  const types = get("tokenizer.ggml.token_type");
  if (!Array.isArray(types) || types.length !== tokens.length) fail("token_type length differs from tokens");
  const merges = strings("tokenizer.ggml.merges");
  const mergeSet = new Set<string>();
  for (const merge of merges) {
    const parts = merge.split(" ");
    if (parts.length !== 2 || !seen.has(parts[0]!) || !seen.has(parts[1]!) || !seen.has(parts[0]! + parts[1]!)) {
      fail(`merge ${JSON.stringify(merge)} does not join two tokens into a token`);
    }
    if (mergeSet.has(merge)) fail(`duplicate merge ${JSON.stringify(merge)}`);
    mergeSet.add(merge);
  }
  for (const key of ["bos_token_id", "eos_token_id", "padding_token_id"]) {
    const id = num(`tokenizer.ggml.${key}`);
    if (!Number.isInteger(id) || id < 0 || id >= tokens.length) fail(`tokenizer.ggml.${key} ${id} out of range`);
  }

  const e = num("llama.embedding_length");
  const heads = num("llama.attention.head_count");
  const kvHeads = num("llama.attention.head_count_kv");
  const ff = num("llama.feed_forward_length");
  const blocks = num("llama.block_count");
  if (e % heads !== 0 || heads % kvHeads !== 0) fail("head counts do not divide the embedding length");
  const kvDim = (e / heads) * kvHeads;
  const v = tokens.length;
  const expected = new Map<string, number[]>([
    ["token_embd.weight", [e, v]],
    ["output_norm.weight", [e]],
  ]);
  for (let i = 0; i < blocks; i += 1) {
    const p = `blk.${i}.`;
    expected.set(`${p}attn_norm.weight`, [e]);
    expected.set(`${p}attn_q.weight`, [e, e]);
    expected.set(`${p}attn_k.weight`, [e, kvDim]);
    expected.set(`${p}attn_v.weight`, [e, kvDim]);
    expected.set(`${p}attn_output.weight`, [e, e]);
    expected.set(`${p}ffn_norm.weight`, [e]);
    expected.set(`${p}ffn_gate.weight`, [e, ff]);
    expected.set(`${p}ffn_up.weight`, [e, ff]);
    expected.set(`${p}ffn_down.weight`, [ff, e]);
  }
  const optional = new Map<string, number[]>([["output.weight", [e, v]]]);
  const names = new Set(file.tensors.map((t) => t.name));
  for (const name of expected.keys()) if (!names.has(name)) fail(`missing tensor ${name}`);
  let end = 0;
  for (const tensor of file.tensors) {
    const dims = expected.get(tensor.name) ?? optional.get(tensor.name) ?? fail(`unexpected tensor ${tensor.name}`);
    if (dims.join(",") !== tensor.dims.join(",")) fail(`tensor ${tensor.name} has dims [${tensor.dims}] not [${dims}]`);
    if (tensor.offset % 32 !== 0 || tensor.offset < end) fail(`tensor ${tensor.name} is misaligned or overlaps`);
    end = tensor.offset + ggufTensorByteSize(tensor);
  }
  if (file.dataOffset + end > file.bytes.length) fail("tensor data runs past the end of the file");
}
