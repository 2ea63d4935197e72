import { createHash } from "node:crypto";
import { canonicalJson } from "../eventStore/canonicalJson.ts";

/** One stream head a checkpoint commits to: [streamId, version, head hash (hex)]. */
export type StreamHead = [streamId: string, version: number, hash: string];

const sha256 = (...parts: (Buffer | string)[]) => {
  const h = createHash("sha256");
  for (const part of parts) h.update(part);
  return h.digest();
};

/**
 * Merkle root (hex) over stream heads sorted by stream id (RFC 6962 style, domain-separated):
 * leaf = SHA-256(0x00 || canonicalJson([streamId, version, hash])), node = SHA-256(0x01 || left || right);
 * an odd node at the end of a level moves up unchanged. The root of no heads is SHA-256 of nothing.
 */
export function merkleRoot(heads: StreamHead[]): string {
  if (heads.length === 0) return sha256().toString("hex");
  let level: Buffer[] = heads.map((head) => sha256(Buffer.from([0]), canonicalJson(head)));
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(i + 1 < level.length ? sha256(Buffer.from([1]), level[i]!, level[i + 1]!) : level[i]!);
    level = next;
  }
  return level[0]!.toString("hex");
}
