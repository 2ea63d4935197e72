import { readFile } from "node:fs/promises";

/** The resident set size (KiB) in the text of /proc/<pid>/status (its `VmRSS:` line, in kB), or null. */
export function parseVmRssKiB(status: string): number | null {
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  return match ? Number(match[1]) : null;
}

/** A process's resident set size (KiB) from /proc/<pid>/status, read only; null when it is gone. */
export async function processRssKiB(pid: number): Promise<number | null> {
  const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => null);
  return status === null ? null : parseVmRssKiB(status);
}

/**
 * The memory a process uses per open stream: RSS with `open` streams open minus RSS idle (both KiB),
 * divided by `streams` (the level's streams, all open at the sample). NaN when a sample is missing.
 */
export function kibPerStream(idleKiB: number | null, openKiB: number | null, streams: number): number {
  if (idleKiB === null || openKiB === null || streams <= 0) return Number.NaN;
  return (openKiB - idleKiB) / streams;
}
