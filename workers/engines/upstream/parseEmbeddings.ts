import { EngineError, type EmbedResult } from "../engine.ts";
import { estimateTokens } from "./estimateTokens.ts";
import { EmbeddingResponseSchema } from "./upstreamWire.ts";

/**
 * The vectors of an upstream /embeddings answer, in input order. Accepts float arrays and base64
 * (little-endian float32). promptTokens is the upstream's count, or an estimate if it reports none.
 */
export function parseEmbeddings(text: string, inputs: string[]): EmbedResult {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new EngineError("internal", "upstream embeddings answer is not JSON");
  }
  const parsed = EmbeddingResponseSchema.safeParse(json);
  if (!parsed.success) throw new EngineError("internal", "upstream embeddings answer has an unexpected shape");
  const rows = parsed.data.data.map((row, position) => ({ index: row.index ?? position, embedding: row.embedding }));
  rows.sort((a, b) => a.index - b.index);
  if (rows.length !== inputs.length || rows.some((row, i) => row.index !== i)) {
    throw new EngineError("internal", `upstream returned ${rows.length} embeddings for ${inputs.length} inputs`);
  }
  const embeddings = rows.map((row) => (typeof row.embedding === "string" ? fromBase64(row.embedding) : row.embedding));
  // A report of 0 tokens for non-empty inputs is estimated, as none is; above, the worker holds it within the hold's bound.
  const reported = parsed.data.usage?.prompt_tokens;
  const promptTokens = reported ? reported : inputs.reduce((sum, input) => sum + estimateTokens(input), 0);
  return { embeddings, promptTokens };
}

function fromBase64(value: string): number[] {
  const bytes = Buffer.from(value, "base64");
  if (bytes.length % 4 !== 0) throw new EngineError("internal", "upstream embedding is not float32 base64");
  const out = new Array<number>(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}
