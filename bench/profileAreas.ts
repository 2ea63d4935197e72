/** A profile frame as bench/profileSummary.ts reads it. */
export type AreaFrame = { functionName: string; url: string };

/** Native functions that are the socket writes of any connection (HTTP clients, Redis, PostgreSQL). */
const SOCKET_WRITES = new Set(["writev", "writeUtf8String", "writeBuffer", "writeLatin1String", "writeAsciiString"]);

/**
 * The area of the code a sample's own frame belongs to, for "where a request's CPU goes": the garbage
 * collector, socket writes, Node's own code, each dependency by package (ioredis, pg, bullmq, koa, zod,
 * ...), and the platform's code by folder (src/api, workers, src/contracts, src/ledger, ...).
 */
export function areaOf(frame: AreaFrame): string {
  const { functionName, url } = frame;
  if (functionName === "(garbage collector)") return "garbage collection";
  if (functionName === "(program)") return "V8 (program)";
  if (SOCKET_WRITES.has(functionName)) return "socket writes";
  if (url === "") return functionName === "runMicrotasks" ? "microtask queue" : "native (other)";
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (packageMatch) {
    const name = packageMatch[1]!;
    if (name.startsWith("@opentelemetry/")) return "dependency: @opentelemetry/*";
    if (name === "koa" || name.startsWith("koa-") || name.startsWith("@koa/")) return "dependency: koa";
    return `dependency: ${name}`;
  }
  if (url.startsWith("node:") || !url.includes("/")) return "node internals";
  const own = /\/(src\/[^/]+|workers|projections|bench)\//.exec(url);
  if (own) return `platform: ${own[1]}`;
  return "other";
}

/** Samples per area, largest first. */
export function samplesByArea(frames: Iterable<[AreaFrame, number]>): [string, number][] {
  const areas = new Map<string, number>();
  for (const [frame, count] of frames) {
    const area = areaOf(frame);
    areas.set(area, (areas.get(area) ?? 0) + count);
  }
  return [...areas].sort((a, b) => b[1] - a[1]);
}
