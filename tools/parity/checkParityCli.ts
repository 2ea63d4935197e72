/**
 * llama.cpp vs PyTorch parity check of the built-in model:
 *   npm exec -- node tools/parity/checkParityCli.ts models/austen-1m.gguf models/austen-1m.reference.json
 * Exits non-zero when a top-5 log-probability differs by more than PARITY_TOLERANCE (F32 KV cache); also
 * reports, for information, the difference with llama.cpp's default F16 KV cache.
 */
import { getLlama } from "node-llama-cpp";
import { checkParity, PARITY_TOLERANCE, readParityReference } from "./checkParity.ts";

const [modelPath, referencePath] = process.argv.slice(2);
if (modelPath === undefined || referencePath === undefined) throw new Error("usage: checkParityCli.ts MODEL.gguf REFERENCE.json");
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath });
const reference = await readParityReference(referencePath);
const result = await checkParity(model, reference, { kvCache: "f32" });
const withF16Cache = await checkParity(model, reference, { kvCache: "f16" });
console.log(
  JSON.stringify({
    kvCacheF32: { ...result, tolerance: PARITY_TOLERANCE, pass: result.maxAbsDiff <= PARITY_TOLERANCE && result.topSetMismatches === 0 },
    kvCacheF16Informational: withF16Cache,
  }),
);
await model.dispose();
await llama.dispose();
if (result.maxAbsDiff > PARITY_TOLERANCE || result.topSetMismatches > 0) process.exitCode = 1;
