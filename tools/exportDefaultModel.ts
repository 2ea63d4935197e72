/**
 * Builds the built-in model's GGUF from a training run:
 *   npm exec -- node tools/exportDefaultModel.ts DATA_DIR RUN_DIR models/austen-1m.gguf
 * DATA_DIR holds tokenizer.json (tools/train/buildDataset.ts); RUN_DIR holds config.json and
 * weights/<name>.bin (float32 LE) from tools/train/train.py. Matrices are written as F16, norms F32,
 * the output projection is tied to the token embedding.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { buildLlamaGguf, CHATML_TEMPLATE } from "./gguf/llamaGguf.ts";
import type { LlamaLayerWeights } from "./gguf/llamaGguf.ts";

const RunConfigSchema = z.object({
  config: z.object({
    vocab: z.number().int(),
    embd: z.number().int(),
    heads: z.number().int(),
    layers: z.number().int(),
    ff: z.number().int(),
    context: z.number().int(),
    eps: z.number(),
    rope_base: z.number(),
  }),
});

const TokenizerFileSchema = z.object({
  tokens: z.array(z.string()),
  tokenTypes: z.array(z.number().int()),
  merges: z.array(z.string()),
  bosId: z.number().int(),
  eosId: z.number().int(),
  padId: z.number().int(),
});

const [dataDir, runDir, outPath] = process.argv.slice(2);
if (dataDir === undefined || runDir === undefined || outPath === undefined) {
  throw new Error("usage: exportDefaultModel.ts DATA_DIR RUN_DIR OUT.gguf");
}
const { config } = RunConfigSchema.parse(JSON.parse(await readFile(join(runDir, "config.json"), "utf8")));
const tokenizer = TokenizerFileSchema.parse(JSON.parse(await readFile(join(dataDir, "tokenizer.json"), "utf8")));

async function weight(name: string, expected: number): Promise<Float32Array> {
  const bytes = await readFile(join(runDir!, "weights", `${name}.bin`));
  const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  if (values.length !== expected) throw new Error(`${name}: ${values.length} values, expected ${expected}`);
  return values;
}

const e = config.embd;
const layers: LlamaLayerWeights[] = [];
for (let i = 0; i < config.layers; i += 1) {
  const p = `blocks.${i}.`;
  layers.push({
    attnNorm: await weight(`${p}attn_norm.weight`, e),
    wq: await weight(`${p}wq.weight`, e * e),
    wk: await weight(`${p}wk.weight`, e * e),
    wv: await weight(`${p}wv.weight`, e * e),
    wo: await weight(`${p}wo.weight`, e * e),
    ffnNorm: await weight(`${p}ffn_norm.weight`, e),
    wGate: await weight(`${p}w_gate.weight`, config.ff * e),
    wUp: await weight(`${p}w_up.weight`, config.ff * e),
    wDown: await weight(`${p}w_down.weight`, e * config.ff),
  });
}
const bytes = buildLlamaGguf(
  {
    name: "austen-1m",
    contextLength: config.context,
    embeddingLength: e,
    blockCount: config.layers,
    feedForwardLength: config.ff,
    headCount: config.heads,
    headCountKv: config.heads,
    rmsEpsilon: config.eps,
    ropeFreqBase: config.rope_base,
  },
  {
    vocab: { tokens: tokenizer.tokens, tokenTypes: tokenizer.tokenTypes, merges: tokenizer.merges },
    bosId: tokenizer.bosId,
    eosId: tokenizer.eosId,
    padId: tokenizer.padId,
    addBos: true,
    chatTemplate: CHATML_TEMPLATE,
  },
  {
    tokenEmbedding: await weight("tok_emb.weight", config.vocab * e),
    outputNorm: await weight("norm.weight", e),
    layers,
  },
  {
    matrixType: "f16",
    extraMetadata: [
      ["general.description", { type: "string", value: "Tiny llama model trained on Jane Austen's six novels and ChatML exchanges built from them" }],
      ["general.license", { type: "string", value: "public-domain" }],
    ],
  },
);
await writeFile(outPath, bytes);
console.log(`wrote ${outPath} (${bytes.length} bytes)`);
