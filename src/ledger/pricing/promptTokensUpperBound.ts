/** Tokens a chat template may add around each part (role markers, separators). */
const TEMPLATE_TOKENS_PER_PART = 8;
/** Tokens a template may add once (begin/end of text, generation prompt). */
const TEMPLATE_TOKENS_BASE = 32;

/**
 * An upper bound of a request's prompt tokens, known in the API before any tokenizer runs: every token
 * of a byte-level (BPE, or SentencePiece with byte fallback) tokenizer covers at least one byte of text,
 * so the UTF-8 size of the prompt's parts (message contents, the completion prompt, tool definitions as
 * JSON, embedding inputs) plus the template's markers bounds it; a prompt longer than the model's
 * context cannot run, so the context length bounds it too. Generous for prose (about 4 bytes a token),
 * which only means a larger temporary hold, never an undercharge.
 */
export function promptTokensUpperBound(parts: readonly unknown[], contextLength: number): number {
  let bytes = 0;
  for (const part of parts) {
    bytes += Buffer.byteLength(typeof part === "string" ? part : (JSON.stringify(part) ?? ""), "utf8") + TEMPLATE_TOKENS_PER_PART;
  }
  return Math.min(bytes + TEMPLATE_TOKENS_BASE, contextLength);
}
