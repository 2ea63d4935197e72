/**
 * GPT-2 pre-tokenizer (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT2, "pre" = "gpt-2"): splits text into
 * the words that byte-level BPE then merges independently.
 */
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export function pretokenize(text: string): string[] {
  return text.match(GPT2_SPLIT) ?? [];
}
