/**
 * Measures the embedded engine on one GGUF: binding start-up, model load, generation speed of one stream, and the
 * total tokens/s of many concurrent streams decoded together (one stream and N streams alternate in the same run,
 * so that other work on the machine weighs on both alike).
 * Usage: npm exec -- node bench/benchEmbedded.ts <model.gguf> [--threads 1] [--tokens 256] [--streams 16] [--rounds 3]
 */
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { createLlama } from "../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest } from "../workers/engines/engine.ts";

export type EmbeddedBenchOptions = { threads: number; tokens: number; streams: number; rounds: number };

type Run = { tokens: number; wallMs: number; cpuMs: number };

const prompts = ["Tell me a long story about a ball at Netherfield.", "Who is Emma?", "Tell me about Mr. Darcy.", "What did Elizabeth say?"];

function request(stream: number, reply: number, maxTokens: number): ChatRequest {
  return {
    messages: [{ role: "user", content: prompts[stream % prompts.length]! }],
    maxTokens,
    temperature: 0.8,
    topP: 1,
    seed: stream * 1000 + reply + 1,
    presencePenalty: 0,
    frequencyPenalty: 0,
  };
}

/** `streams` clients at once, each asking for replies (they end by themselves) until it got `tokens` tokens. */
async function generate(engine: EmbeddedEngine, streams: number, tokens: number): Promise<Run> {
  const signal = new AbortController().signal;
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  const counts = await Promise.all(
    Array.from({ length: streams }, async (_, stream) => {
      let got = 0;
      for (let reply = 0; got < tokens; reply += 1) {
        got += (await engine.chat(request(stream, reply, tokens - got), () => {}, signal)).usage.completionTokens;
      }
      return got;
    }),
  );
  const cpu = process.cpuUsage(cpuStarted);
  return { tokens: counts.reduce((sum, count) => sum + count, 0), wallMs: performance.now() - started, cpuMs: (cpu.user + cpu.system) / 1000 };
}

const perSecond = (run: Run): number => Math.round((run.tokens / run.wallMs) * 1000);
const perCpuSecond = (run: Run): number => Math.round((run.tokens / run.cpuMs) * 1000);
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function benchEmbedded(modelPath: string, options: EmbeddedBenchOptions): Promise<Record<string, unknown>> {
  const started = performance.now();
  const llama = await createLlama({ gpu: "auto" });
  const bindingMs = performance.now() - started;
  const loadStarted = performance.now();
  const engine = await EmbeddedEngine.load({ modelPath, threads: options.threads, maxConcurrency: options.streams }, { llama });
  const loadMs = performance.now() - loadStarted;
  try {
    await generate(engine, options.streams, 16); // warm-up: every sequence once
    const single: Run[] = [];
    const concurrent: Run[] = [];
    for (let round = 0; round < options.rounds; round += 1) {
      single.push(await generate(engine, 1, options.tokens));
      concurrent.push(await generate(engine, options.streams, options.tokens));
    }
    const singleTps = single.map(perSecond);
    const concurrentTps = concurrent.map(perSecond);
    return {
      machine: `${cpus().length} cores (${cpus()[0]?.model ?? "unknown"}), load average ${loadavg()[0]!.toFixed(1)} at the end`,
      gpu: engine.gpu,
      bindingMs: Math.round(bindingMs),
      modelLoadMs: Math.round(loadMs),
      threads: engine.threads,
      streams: options.streams,
      tokensPerStream: options.tokens,
      oneStreamTokensPerSecond: singleTps,
      concurrentTokensPerSecond: concurrentTps,
      ratioPerRound: concurrentTps.map((value, index) => Number((value / singleTps[index]!).toFixed(2))),
      medianRatio: Number((median(concurrentTps) / median(singleTps)).toFixed(2)),
      oneStreamTokensPerCpuSecond: single.map(perCpuSecond),
      concurrentTokensPerCpuSecond: concurrent.map(perCpuSecond),
    };
  } finally {
    await engine.close();
  }
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      threads: { type: "string", default: "1" },
      tokens: { type: "string", default: "256" },
      streams: { type: "string", default: "16" },
      rounds: { type: "string", default: "3" },
    },
  });
  const [modelPath] = positionals;
  if (modelPath === undefined) throw new Error("usage: benchEmbedded.ts <model.gguf> [--threads 1] [--tokens 256] [--streams 16] [--rounds 3]");
  const options = { threads: Number(values.threads), tokens: Number(values.tokens), streams: Number(values.streams), rounds: Number(values.rounds) };
  console.log(JSON.stringify(await benchEmbedded(modelPath, options), null, 2));
}
