/**
 * Tokens per second of a GGUF with node-llama-cpp on the CPU:
 *   npm exec -- node tools/measureSpeed.ts models/austen-1m.gguf [threads=1]
 * Reports prompt evaluation and generation (greedy, 200 tokens) speed, best of 3 runs.
 */
import { getLlama } from "node-llama-cpp";

const [modelPath, threadsArg] = process.argv.slice(2);
if (modelPath === undefined) throw new Error("usage: measureSpeed.ts MODEL.gguf [threads]");
const threads = Number(threadsArg ?? "1");
const llama = await getLlama({ gpu: false, build: "never" });
const loadStart = performance.now();
const model = await llama.loadModel({ modelPath });
const loadMs = performance.now() - loadStart;
const context = await model.createContext({ contextSize: 256, threads });
const sequence = context.getSequence();
const prompt = model.tokenize(
  "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. However little known the feelings or views of such a man may be on his first entering a neighbourhood,",
);
const generate = 200;
let bestPrompt = 0;
let bestGen = 0;
for (let run = 0; run < 3; run += 1) {
  await sequence.clearHistory();
  const t0 = performance.now();
  await sequence.evaluateWithoutGeneratingNewTokens(prompt);
  const t1 = performance.now();
  let count = 0;
  for await (const token of sequence.evaluate([model.tokenize(" It")[0]!], { temperature: 0 })) {
    void token;
    count += 1;
    if (count >= generate) break;
  }
  const t2 = performance.now();
  bestPrompt = Math.max(bestPrompt, (prompt.length / (t1 - t0)) * 1000);
  bestGen = Math.max(bestGen, (count / (t2 - t1)) * 1000);
}
console.log(
  JSON.stringify({
    model: modelPath,
    threads,
    loadMs: Math.round(loadMs),
    promptTokens: prompt.length,
    promptTokensPerSecond: Math.round(bestPrompt),
    generatedTokens: generate,
    generationTokensPerSecond: Math.round(bestGen),
  }),
);
await context.dispose();
await model.dispose();
await llama.dispose();
