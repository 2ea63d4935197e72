import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { PerformanceObserver } from "node:perf_hooks";
import { parseArgs } from "node:util";
import v8 from "node:v8";
import { type CompletionJob, CompletionJobSchema } from "../src/contracts/completionJob.ts";
import { InferenceKeys } from "../src/contracts/inferenceKeys.ts";
import { loadModelRegistry } from "../src/models/loadModelRegistry.ts";
import { silentLogger } from "../src/observability/logger.ts";
import { createMetrics } from "../src/observability/metrics.ts";
import { CoalescingWindow } from "../workers/completion/coalescingWindow.ts";
import { CompletionJobRunner } from "../workers/completion/completionJobRunner.ts";
import { DeltaPublisher } from "../workers/completion/deltaPublisher.ts";
import type { TurnMessage, TurnWriter } from "../workers/completion/turnWriter.ts";
import type { UsageRecorder } from "../workers/completion/usageRecorder.ts";
import type { ChatRequest } from "../workers/engines/engine.ts";
import { meteredEngine } from "../workers/engines/meteredEngine.ts";
import { SERVICE_NODE_FLAGS } from "./serviceNodeFlags.ts";
import { FakeUpstreamEngine, fakeUpstreamAnswer, type TokenPacing, upstreamFrames } from "./workerTokenSource.ts";

/**
 * The worker's CPU and garbage per token, without Redis, PostgreSQL or sockets: `--streams` concurrent
 * chat jobs of `--per-stream` tokens (one SSE frame every `--interval-ms`, the engine stand-in's frames)
 * until `--tokens` tokens were generated, after a warm-up round. `--stage`:
 *
 * - source: the fake upstream bodies alone, read by a listener that does nothing (the bench's own cost);
 * - adapter: the upstream adapter (relayChatStream, SseParser, ChatStreamAccumulator) into a sink that does nothing;
 * - worker: the job's data parsed as CompletionWorker does, then CompletionJobRunner with the metered
 *   adapter, its DeltaPublisher (coalescing window `--window-ms`) and a TurnWriter stand-in that keeps
 *   nothing; usage recording answers at once.
 *
 * Prints CPU ms, garbage collections (count, ms) and the bytes allocated on the JS heap (from the heap
 * before and after each collection), each also per 1,000 tokens. `--heap-profile <file>`: a sampling heap
 * profile of the measured rounds with the objects collected since (allocations, not what is retained),
 * written as a .heapprofile, and its top allocating functions printed.
 *
 * `node --max-semi-space-size=16 bench/workerTokens.ts --stage worker [--tokens 100000]
 * [--streams 128] [--per-stream 100] [--interval-ms 10] [--window-ms 4] [--rounds 3]` (run with the
 * service's V8 flags, SERVICE_NODE_FLAGS, for figures comparable with the platform's).
 */
const { values } = parseArgs({
  options: {
    stage: { type: "string", default: "worker" },
    tokens: { type: "string", default: "100000" },
    streams: { type: "string", default: "128" },
    "per-stream": { type: "string", default: "100" },
    "interval-ms": { type: "string", default: "10" },
    "window-ms": { type: "string", default: "4" },
    rounds: { type: "string", default: "3" },
    "heap-profile": { type: "string" },
  },
});
const stage = values.stage as "source" | "adapter" | "worker";
const pacing: TokenPacing = { ttftMs: 20, interTokenMs: Number(values["interval-ms"]), tokens: Number(values["per-stream"]) };
const streams = Number(values.streams);
const totalTokens = Number(values.tokens);

const registry = await loadModelRegistry(new URL("../models/registry.json", import.meta.url).pathname);
const model = registry.all()[0]!;
const frames = upstreamFrames(pacing.tokens);
const adapter = new FakeUpstreamEngine(pacing);
const metrics = createMetrics();
const keys = new InferenceKeys("bench");
const window = new CoalescingWindow(Number(values["window-ms"]));
let written = { messages: 0, bytes: 0 };
const done = Promise.resolve();
const writer = {
  write: (message: TurnMessage) => {
    written.messages += 1;
    written.bytes += message.messageJson.length;
    return done;
  },
} as unknown as TurnWriter;
const usage = { record: async () => "recorded", recorded: async () => null } as unknown as UsageRecorder;
const runner = new CompletionJobRunner({
  model,
  engine: meteredEngine(adapter, model.id, metrics.inference, model.context_length),
  usage,
  publisherFor: (job, firstSeq) => new DeltaPublisher(keys, job, { window, writer, replayTtlSeconds: 3600, replayMaxLen: 1000, firstSeq }),
  replay: { read: async () => [] },
  now: () => new Date(),
  logger: silentLogger,
});
const request: ChatRequest = {
  messages: [{ role: "user", content: "Count for me." }],
  maxTokens: pacing.tokens,
  temperature: 1,
  topP: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
};
let jobNumber = 0;
/** The job's data as BullMQ hands it to the processor (JSON, parsed by BullMQ). */
const jobJson = (): string =>
  JSON.stringify({
    completionId: `chatcmpl-${String(jobNumber++).padStart(24, "0")}`,
    endpoint: "chat.completions",
    model: model.id,
    accountId: "00000000-0000-4000-8000-000000000001",
    keyId: "00000000-0000-4000-8000-000000000002",
    created: 1_764_160_000,
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    replyTo: "bench:replies:api-1",
    work: { kind: "chat", request },
  } satisfies CompletionJob);

/** One job of the stage, resolved when its stream ended. */
async function oneJob(): Promise<void> {
  const data = JSON.parse(jobJson()) as unknown;
  if (stage === "source") {
    const answer = fakeUpstreamAnswer(pacing, frames);
    await new Promise<void>((resolve) => {
      answer.response.on("data", () => undefined);
      answer.response.on("end", resolve);
      answer.start();
    });
  } else if (stage === "adapter") {
    await adapter.chat(request, () => undefined, new AbortController().signal);
  } else {
    const parsed = CompletionJobSchema.safeParse(data);
    if (!parsed.success) throw new Error("invalid job data");
    await runner.run(parsed.data, new AbortController().signal, "new");
  }
}

/** `tokens` tokens' worth of jobs, `streams` at a time. */
async function round(tokens: number): Promise<void> {
  let jobsLeft = Math.ceil(tokens / pacing.tokens);
  const lane = async (): Promise<void> => {
    while (jobsLeft > 0) {
      jobsLeft -= 1;
      await oneJob();
    }
  };
  await Promise.all(Array.from({ length: streams }, lane));
}

type Gc = { count: number; ms: number; minor: number; major: number };

/** Runs `work` and measures it: CPU, collections, bytes allocated on the JS heap. */
async function measured(work: () => Promise<void>): Promise<{ cpuMs: number; wallMs: number; gc: Gc; allocatedMb: number }> {
  const gc: Gc = { count: 0, ms: 0, minor: 0, major: 0 };
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.count += 1;
      gc.ms += entry.duration;
      const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === 1 /* minor */ || kind === 2 /* minor (Minor Mark-Sweep) */) gc.minor += 1;
      else gc.major += 1;
    }
  });
  observer.observe({ entryTypes: ["gc"] });
  const profiler = new v8.GCProfiler();
  const usedBefore = v8.getHeapStatistics().used_heap_size;
  profiler.start();
  const cpu = process.cpuUsage();
  const wall = performance.now();
  await work();
  const cpuUsed = process.cpuUsage(cpu);
  const wallMs = performance.now() - wall;
  const usedAfter = v8.getHeapStatistics().used_heap_size;
  const profile = profiler.stop();
  await new Promise((resolve) => setImmediate(resolve));
  observer.disconnect();
  let allocated = 0;
  let last = usedBefore;
  for (const entry of profile?.statistics ?? []) {
    allocated += Math.max(0, entry.beforeGC.heapStatistics.usedHeapSize - last);
    last = entry.afterGC.heapStatistics.usedHeapSize;
  }
  allocated += Math.max(0, usedAfter - last);
  return { cpuMs: (cpuUsed.user + cpuUsed.system) / 1000, wallMs, gc, allocatedMb: allocated / 1e6 };
}

/** The heaviest allocators of a sampling heap profile, by self size. */
function topAllocators(profile: { head: HeapNode }, count: number): string[] {
  const bySite = new Map<string, number>();
  const walk = (node: HeapNode): void => {
    const frame = node.callFrame;
    const file = frame.url.replace(/^.*\/(wt-[^/]+|main)\//, "").replace(/^file:\/\//, "");
    const site = `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`;
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const total = [...bySite.values()].reduce((a, b) => a + b, 0);
  return [...bySite.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([site, bytes]) => `${((100 * bytes) / total).toFixed(1).padStart(5)} %  ${(bytes / 1e6).toFixed(1).padStart(7)} MB  ${site}`);
}
type HeapNode = { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize: number; children: HeapNode[] };

const flags = process.execArgv.filter((flag) => (SERVICE_NODE_FLAGS as readonly string[]).includes(flag));
process.stdout.write(
  `stage ${stage}: ${totalTokens} tokens a round, ${streams} streams of ${pacing.tokens} tokens every ${pacing.interTokenMs} ms, window ${values["window-ms"]} ms, flags [${flags.join(" ")}]\n`,
);
await round(Math.min(totalTokens, 20_000));
const session = values["heap-profile"] ? new Session() : null;
if (session) {
  session.connect();
  await session.post("HeapProfiler.enable");
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  } as never);
}
const per = (value: number) => ((value * 1000) / totalTokens).toFixed(2);
for (let i = 0; i < Number(values.rounds); i++) {
  written = { messages: 0, bytes: 0 };
  const m = await measured(() => round(totalTokens));
  process.stdout.write(
    `round ${i + 1}: CPU ${m.cpuMs.toFixed(0)} ms (${per(m.cpuMs)} ms / 1k tokens) in ${(m.wallMs / 1000).toFixed(1)} s; ` +
      `GC ${m.gc.count} (${m.gc.minor} minor, ${m.gc.major} major) ${m.gc.ms.toFixed(0)} ms; ` +
      `allocated ${m.allocatedMb.toFixed(0)} MB (${((m.allocatedMb * 1e6) / totalTokens).toFixed(0)} B / token)` +
      (stage === "worker" ? `; ${written.messages} messages, ${(written.bytes / Math.max(1, written.messages)).toFixed(0)} B each` : "") +
      "\n",
  );
}
if (session && values["heap-profile"]) {
  const { profile } = (await session.post("HeapProfiler.stopSampling")) as unknown as { profile: { head: HeapNode } };
  await writeFile(values["heap-profile"], JSON.stringify(profile));
  process.stdout.write(`top allocators (sampled, collected objects included), written to ${values["heap-profile"]}:\n`);
  for (const line of topAllocators(profile, 30)) process.stdout.write(`${line}\n`);
  session.disconnect();
}
