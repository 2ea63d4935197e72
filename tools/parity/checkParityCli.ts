/**
 * llama.cpp vs PyTorch parity check of the built-in model:
 *   npm exec -- node tools/parity/checkParityCli.ts models/austen-1m.gguf models/austen-1m.reference.json
 * Exits non-zero when a top-5 log-probability differs by more than 1e-4 (F32 KV cache); also
 * reports, for information, the difference with llama.cpp's default F16 KV cache.
 */
import { getLlama } from "node-llama-cpp";
import { checkParity, readParityReference } from "./checkParity.ts";

const [modelPath, referencePath] = process.argv.slice(2);
if (modelPath === undefined || referencePath === undefined) throw new Error("usage: checkParityCli.ts MODEL.gguf REFERENCE.json");
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath });
const reference = await readParityReference(referencePath);
const result = await checkParity(model, reference, { kvCache: "f32" });
const withF16Cache = await checkParity(model, reference, { kvCache: "f16" });
console.log(JSON.stringify({ kvCacheF32: { ...result, tolerance: 1e-4, pass: result.maxAbsDiff <= 1e-4 && result.topSetMismatches === 0 }, kvCacheF16Informational: withF16Cache }));
await model.dispose();
await llama.dispose();
if (result.maxAbsDiff > 1e-4) process.exitCode = 1;
