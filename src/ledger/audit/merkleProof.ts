import { hash } from "node:crypto";
import { canonicalJson } from "../eventStore/canonicalJson.ts";

/** One step up from a leaf: the sibling's hash (hex) and on which side it sits. */
export type MerkleStep = ["L" | "R", string];

/**
 * The audit paths of the heads at `indices` in the tree merkleRoot() builds over `heads` (sorted by
 * stream id; or over any leaves, such as accountLeaves()): hashing the leaf with each sibling in turn (left sibling: SHA-256(0x01 || sibling ||
 * node), right: SHA-256(0x01 || node || sibling)) gives the root. A node moved up unchanged (the odd one
 * at the end of a level) adds no step. Lets an export prove its own streams' heads without listing any
 * other account's stream.
 */
export function merkleProofs(heads: readonly unknown[], indices: number[]): MerkleStep[][] {
  const proofs: MerkleStep[][] = indices.map(() => []);
  const at = [...indices];
  let level: Buffer[] = heads.map((head) => hash("sha256", `\u0000${canonicalJson(head)}`, "buffer"));
  while (level.length > 1) {
    for (const [p, i] of at.entries()) {
      const sibling = i % 2 === 0 ? i + 1 : i - 1;
      if (sibling < level.length) proofs[p]!.push([i % 2 === 0 ? "R" : "L", level[sibling]!.toString("hex")]);
      at[p] = Math.floor(i / 2);
    }
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) {
      next.push(i + 1 < level.length ? hash("sha256", Buffer.concat([Buffer.of(1), level[i]!, level[i + 1]!]), "buffer") : level[i]!);
    }
    level = next;
  }
  return proofs;
}

/** The root a head and its audit path lead to (hex). */
export function merkleRootFromProof(head: unknown, proof: MerkleStep[]): string {
  let node = hash("sha256", `\u0000${canonicalJson(head)}`, "buffer");
  for (const [side, sibling] of proof) {
    const s = Buffer.from(sibling, "hex");
    node = hash("sha256", Buffer.concat([Buffer.of(1), side === "L" ? s : node, side === "L" ? node : s]), "buffer");
  }
  return node.toString("hex");
}
