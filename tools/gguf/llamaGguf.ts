import { buildGguf } from "./ggufWriter.ts";
import type { BpeVocab } from "./bpeTokenizer.ts";
import type { GgmlTypeName, GgufMetadata, GgufTensor } from "./ggufTypes.ts";
import { parseGguf } from "./ggufReader.ts";
import { validateLlamaGguf } from "./validateLlamaGguf.ts";

/** ChatML, as Qwen and most ChatML fine-tunes ship it; node-llama-cpp recognises it as ChatML. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export type LlamaHyperparameters = {
  name: string;
  contextLength: number;
  embeddingLength: number;
  blockCount: number;
  feedForwardLength: number;
  headCount: number;
  headCountKv: number;
  rmsEpsilon: number;
  ropeFreqBase: number;
};

export type LlamaTokenizerSpec = {
  vocab: BpeVocab;
  bosId: number;
  eosId: number;
  padId: number;
  addBos: boolean;
  chatTemplate: string;
};

/** All matrices row-major as PyTorch stores nn.Linear weights: [out, in]. */
export type LlamaLayerWeights = {
  attnNorm: Float32Array;
  wq: Float32Array;
  wk: Float32Array;
  wv: Float32Array;
  wo: Float32Array;
  ffnNorm: Float32Array;
  wGate: Float32Array;
  wUp: Float32Array;
  wDown: Float32Array;
};

export type LlamaWeights = {
  /** [vocab, embd] */
  tokenEmbedding: Float32Array;
  outputNorm: Float32Array;
  /** [vocab, embd]; omit to tie the output projection to the token embedding. */
  output?: Float32Array;
  layers: LlamaLayerWeights[];
};

export type BuildLlamaOptions = {
  /** Type of the 2-D weight matrices; norms always stay F32. */
  matrixType: GgmlTypeName;
  extraMetadata?: GgufMetadata;
};

/**
 * Builds (and validates by reading back) a llama-architecture GGUF. RoPE is llama.cpp's LLAMA
 * (normal) type, which rotates adjacent pairs (x[2i], x[2i+1]); q/k weights are written as given,
 * so a trainer must use that same convention (no rotate-half permutation).
 */
export function buildLlamaGguf(hp: LlamaHyperparameters, tokenizer: LlamaTokenizerSpec, weights: LlamaWeights, options: BuildLlamaOptions): Uint8Array {
  const headDim = hp.embeddingLength / hp.headCount;
  const kvDim = headDim * hp.headCountKv;
  const vocabSize = tokenizer.vocab.tokens.length;
  const metadata: GgufMetadata = [
    ["general.architecture", { type: "string", value: "llama" }],
    ["general.name", { type: "string", value: hp.name }],
    ["general.file_type", { type: "u32", value: options.matrixType === "f16" ? 1 : 0 }],
    ["general.alignment", { type: "u32", value: 32 }],
    ["llama.context_length", { type: "u32", value: hp.contextLength }],
    ["llama.embedding_length", { type: "u32", value: hp.embeddingLength }],
    ["llama.block_count", { type: "u32", value: hp.blockCount }],
    ["llama.feed_forward_length", { type: "u32", value: hp.feedForwardLength }],
    ["llama.attention.head_count", { type: "u32", value: hp.headCount }],
    ["llama.attention.head_count_kv", { type: "u32", value: hp.headCountKv }],
    ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: hp.rmsEpsilon }],
    ["llama.rope.freq_base", { type: "f32", value: hp.ropeFreqBase }],
    ["llama.rope.dimension_count", { type: "u32", value: headDim }],
    ["llama.vocab_size", { type: "u32", value: vocabSize }],
    ["tokenizer.ggml.model", { type: "string", value: "gpt2" }],
    ["tokenizer.ggml.pre", { type: "string", value: "gpt-2" }],
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", value: tokenizer.vocab.tokens }],
    ["tokenizer.ggml.token_type", { type: "array", itemType: "i32", value: tokenizer.vocab.tokenTypes }],
    ["tokenizer.ggml.merges", { type: "array", itemType: "string", value: tokenizer.vocab.merges }],
    ["tokenizer.ggml.bos_token_id", { type: "u32", value: tokenizer.bosId }],
    ["tokenizer.ggml.eos_token_id", { type: "u32", value: tokenizer.eosId }],
    ["tokenizer.ggml.padding_token_id", { type: "u32", value: tokenizer.padId }],
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: tokenizer.addBos }],
    ["tokenizer.ggml.add_eos_token", { type: "bool", value: false }],
    ["tokenizer.chat_template", { type: "string", value: tokenizer.chatTemplate }],
    ...(options.extraMetadata ?? []),
  ];
  const matrix = (name: string, data: Float32Array, rows: number, cols: number): GgufTensor => ({
    name,
    dims: [cols, rows],
    type: options.matrixType,
    data,
  });
  const vector = (name: string, data: Float32Array): GgufTensor => ({ name, dims: [data.length], type: "f32", data });
  const e = hp.embeddingLength;
  const tensors: GgufTensor[] = [matrix("token_embd.weight", weights.tokenEmbedding, vocabSize, e)];
  weights.layers.forEach((layer, i) => {
    const p = `blk.${i}.`;
    tensors.push(
      vector(`${p}attn_norm.weight`, layer.attnNorm),
      matrix(`${p}attn_q.weight`, layer.wq, e, e),
      matrix(`${p}attn_k.weight`, layer.wk, kvDim, e),
      matrix(`${p}attn_v.weight`, layer.wv, kvDim, e),
      matrix(`${p}attn_output.weight`, layer.wo, e, e),
      vector(`${p}ffn_norm.weight`, layer.ffnNorm),
      matrix(`${p}ffn_gate.weight`, layer.wGate, hp.feedForwardLength, e),
      matrix(`${p}ffn_up.weight`, layer.wUp, hp.feedForwardLength, e),
      matrix(`${p}ffn_down.weight`, layer.wDown, e, hp.feedForwardLength),
    );
  });
  tensors.push(vector("output_norm.weight", weights.outputNorm));
  if (weights.output !== undefined) tensors.push(matrix("output.weight", weights.output, vocabSize, e));
  const bytes = buildGguf(metadata, tensors);
  validateLlamaGguf(parseGguf(bytes));
  return bytes;
}
