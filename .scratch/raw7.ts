import { getLlama } from "node-llama-cpp";
const conc = Number(process.argv[2] ?? 16);
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath: "/tmp/i23e-wide.gguf" });
const context: any = await model.createContext({ contextSize: 256, sequences: conc, threads: 1 });
let decodes = 0; const orig = context.dispatchPendingBatch.bind(context); context.dispatchPendingBatch = () => { decodes++; orig(); };
const seqs = Array.from({ length: conc }, () => context.getSequence());
const prompt = model.tokenize("It is a truth universally acknowledged");
async function gen(seq: any, n: number, seed: number) {
  let c = 0;
  for await (const t of seq.evaluate(prompt, { temperature: 0.8, seed })) { void t; if (++c >= n) break; }
  return c;
}
const u0 = process.cpuUsage(); const t0 = performance.now();
const tot = (await Promise.all(seqs.map((s, i) => gen(s, 24, i)))).reduce((a, b) => a + b, 0);
const u = process.cpuUsage(u0);
console.log(conc, tot, "tokens", Math.round(tot / ((u.user + u.system) / 1e6)), "tok/cpu-s", Math.round(tot / (performance.now() - t0) * 1000), "tok/s dispatches", decodes);
await context.dispose(); await model.dispose();
