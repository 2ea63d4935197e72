/**
 * Summarises the CPU profiles `npm run bench -- --profile-dir <dir>` writes, one per platform process:
 *
 *   node bench/profileSummary.ts <dir> <requests> [top=25]
 *
 * Self time is given by area first (garbage collection, socket writes, each dependency, the platform's
 * folders: bench/profileAreas.ts), then by function.
 * `requests` is the number of platform streams of the run (JIT warm-up, level warm-ups and measured
 * streams), so that every figure is also given in CPU milliseconds per request. Figures count samples,
 * not the profile's time deltas: on a loaded machine a process that waited for a core gets its next
 * sample late, and the delta would charge the wait to whatever function ran then. With the default
 * sampling interval one sample is about one millisecond of CPU. Module loading at start-up is in the
 * totals too (the same for two versions of the code; compare the functions of the request path).
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { samplesByArea } from "./profileAreas.ts";

type CallFrame = { functionName: string; url: string; lineNumber: number };
type ProfileNode = { id: number; callFrame: CallFrame; children?: number[] };
type CpuProfile = { nodes: ProfileNode[]; samples: number[]; startTime: number; endTime: number };

const IDLE = new Set(["(idle)", "(root)"]);

function frameName(frame: CallFrame): string {
  const file = frame.url.replace(/^file:\/\/.*?\/(src|workers|bench)\//, "$1/").replace(/^.*node_modules\//, "");
  return `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`;
}

/** The role whose code ran most (`src/main.ts --role worker` loads the API's modules too, but runs none). */
function roleOf(profile: CpuProfile): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  let api = 0;
  let worker = 0;
  for (const id of profile.samples) {
    const url = byId.get(id)!.callFrame.url;
    if (url.includes("/src/api/") || url.includes("/node_modules/koa")) api++;
    else if (url.includes("/workers/")) worker++;
  }
  return api >= worker ? "api" : "worker";
}

function summarise(profile: CpuProfile, requests: number, top: number): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const samples = new Map<number, number>();
  for (const id of profile.samples) samples.set(id, (samples.get(id) ?? 0) + 1);
  const self = new Map<string, number>();
  const frames: [CallFrame, number][] = [];
  let busy = 0;
  for (const [id, count] of samples) {
    const node = byId.get(id)!;
    if (IDLE.has(node.callFrame.functionName)) continue;
    busy += count;
    frames.push([node.callFrame, count]);
    const name = frameName(node.callFrame);
    self.set(name, (self.get(name) ?? 0) + count);
  }
  // Inclusive samples of the platform's own functions, each counted once per stack (recursion).
  const inclusive = new Map<string, number>();
  const walk = (id: number, onStack: Set<string>): number => {
    const node = byId.get(id)!;
    const name = frameName(node.callFrame);
    const fresh = !onStack.has(name);
    if (fresh) onStack.add(name);
    let total = IDLE.has(node.callFrame.functionName) ? 0 : (samples.get(id) ?? 0);
    for (const child of node.children ?? []) total += walk(child, onStack);
    if (fresh) {
      onStack.delete(name);
      if (/^\S+ (src|workers)\//.test(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + total);
    }
    return total;
  };
  walk(profile.nodes[0]!.id, new Set());
  const perRequest = (count: number) => (count / requests).toFixed(3).padStart(7);
  const rows = (entries: Map<string, number>) =>
    [...entries]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, count]) => `${String(count).padStart(7)} ${perRequest(count)}  ${name}`);
  return [
    `busy samples ${busy} (${(busy / requests).toFixed(2)} ms of CPU per request), wall ${((profile.endTime - profile.startTime) / 1e6).toFixed(0)} s`,
    "samples  ms/req  self, by area",
    ...rows(new Map(samplesByArea(frames))),
    "samples  ms/req  self",
    ...rows(self),
    "samples  ms/req  inclusive, platform functions",
    ...rows(inclusive),
  ].join("\n");
}

const [dir, requestsArg, topArg] = process.argv.slice(2);
if (!dir || !requestsArg) {
  process.stderr.write("usage: node bench/profileSummary.ts <profile-dir> <requests> [top=25]\n");
  process.exit(2);
}
for (const file of readdirSync(dir).filter((name) => name.endsWith(".cpuprofile"))) {
  const profile = JSON.parse(readFileSync(path.join(dir, file), "utf8")) as CpuProfile;
  process.stdout.write(`\n== ${file} (${roleOf(profile)})\n${summarise(profile, Number(requestsArg), Number(topArg ?? 25))}\n`);
}
