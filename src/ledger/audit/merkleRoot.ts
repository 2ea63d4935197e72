import { hash } from "node:crypto";
import { canonicalJson } from "../eventStore/canonicalJson.ts";

/** One stream head a checkpoint commits to: [streamId, version, head hash (hex)]. */
export type StreamHead = [streamId: string, version: number, hash: string];

/**
 * Merkle root (hex) over stream heads sorted by stream id (RFC 6962 style, domain-separated):
 * leaf = SHA-256(0x00 || canonicalJson([streamId, version, hash])), node = SHA-256(0x01 || left || right);
 * an odd node at the end of a level moves up unchanged. The root of no heads is SHA-256 of nothing.
 * One-shot hashes (no Hash object per node): the verifier recomputes a root for every checkpoint.
 */
export function merkleRoot(heads: readonly StreamHead[]): string {
  return merkleRootOfLeaves(heads);
}

/**
 * The same tree over any leaf values (each hashed as SHA-256(0x00 || canonical JSON)), in the order
 * given: merkleRoot() over stream heads, accountsRoot() over account leaves.
 */
export function merkleRootOfLeaves(leaves: readonly unknown[]): string {
  if (leaves.length === 0) return hash("sha256", "", "hex");
  // U+0000 is the one byte 0x00 in UTF-8: the leaf prefix and the canonical JSON hash as one string.
  let level: Buffer[] = leaves.map((leaf) => hash("sha256", `\u0000${canonicalJson(leaf)}`, "buffer"));
  const pair = Buffer.alloc(65);
  pair[0] = 1;
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) {
      if (i + 1 < level.length) {
        level[i]!.copy(pair, 1);
        level[i + 1]!.copy(pair, 33);
        next.push(hash("sha256", pair, "buffer"));
      } else next.push(level[i]!);
    }
    level = next;
  }
  return level[0]!.toString("hex");
}
