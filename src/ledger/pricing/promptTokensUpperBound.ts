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

/**
 * Tokens a chat template may add once when a request offers tools: the instructions on how to call them
 * (node-llama-cpp's are about 1,000 bytes of text, so at most that many tokens; an upstream's template,
 * Hermes-style or Llama 3.1's, a few hundred tokens), besides the tools' own definitions, which the
 * request's JSON counts.
 */
export const TOOLS_TEMPLATE_TOKENS = 2048;

/**
 * promptTokensUpperBound of a chat request (its messages, tools and options as JSON), plus the
 * template's tool instructions when it offers tools; capped by the context length.
 */
export function chatPromptTokensUpperBound(request: { readonly maxTokens: number; readonly tools?: readonly unknown[] }, contextLength: number): number {
  const tools = request.tools !== undefined && request.tools.length > 0 ? TOOLS_TEMPLATE_TOKENS : 0;
  return Math.min(promptTokensUpperBound([request], contextLength) + tools, contextLength);
}
