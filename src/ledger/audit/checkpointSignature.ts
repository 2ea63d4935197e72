import { createPrivateKey, createPublicKey, generateKeyPairSync, hash, type KeyObject, sign, verify } from "node:crypto";
import { z } from "zod";
import { canonicalJson } from "../eventStore/canonicalJson.ts";
import type { LogPosition } from "../eventStore/logPosition.ts";

/**
 * The Ed25519 signature a checkpoint carries: the key's id (fingerprint), its public key (base64 of the
 * DER SubjectPublicKeyInfo, so an export is self-describing; an auditor pins the key id or the key, never
 * trusts one read from the database) and the signature (base64) over checkpointStatement().
 */
export const CheckpointSignatureSchema = z.object({
  alg: z.literal("Ed25519"),
  keyId: z.string(),
  publicKey: z.string(),
  value: z.string(),
});
export type CheckpointSignature = z.infer<typeof CheckpointSignatureSchema>;

/** What a checkpoint signs: its place in the checkpoint stream, its log window and the Merkle root of its heads. */
export type CheckpointStatementFields = {
  after: LogPosition;
  upTo: LogPosition;
  eventCount: number;
  streamCount: number;
  merkleRoot: string;
  /** The root of the accounts tree (accountsRoot.ts); absent in checkpoints written before it existed. */
  accountsRoot?: string | undefined;
};

/**
 * The signed bytes (as a UTF-8 string): RFC 8785 canonical JSON of {statement: "audit-checkpoint/2",
 * checkpoint, after, upTo, eventCount, streamCount, merkleRoot, accountsRoot}. A checkpoint without an
 * accounts root (written before it existed) signed {statement: "audit-checkpoint/1", ...} without it,
 * which says nothing about which streams belong to which account. Removing the accounts root from a /2
 * checkpoint makes a /1 statement its signature does not verify. tools/audit/verifyExport.ts builds the
 * same strings on its own.
 */
export function checkpointStatement(checkpoint: number, fields: CheckpointStatementFields): string {
  const common = {
    checkpoint,
    after: fields.after,
    upTo: fields.upTo,
    eventCount: fields.eventCount,
    streamCount: fields.streamCount,
    merkleRoot: fields.merkleRoot,
  };
  return fields.accountsRoot === undefined
    ? canonicalJson({ statement: "audit-checkpoint/1", ...common })
    : canonicalJson({ statement: "audit-checkpoint/2", ...common, accountsRoot: fields.accountsRoot });
}

/** A trusted public key and its id: "ed25519:" + the first 32 hex digits of SHA-256 of its DER SPKI. */
export type CheckpointPublicKey = { keyId: string; key: KeyObject; publicKey: string };

export type CheckpointSigner = CheckpointPublicKey & { sign(statement: string): CheckpointSignature };

function describePublic(key: KeyObject): CheckpointPublicKey {
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`not an Ed25519 key (${key.asymmetricKeyType})`);
  const der = key.export({ type: "spki", format: "der" });
  return { key, publicKey: der.toString("base64"), keyId: `ed25519:${hash("sha256", der, "hex").slice(0, 32)}` };
}

/** The signer of a PEM (PKCS#8) Ed25519 private key, as `npm run audit -- keygen` writes it. */
export function checkpointSignerFromPem(pem: string): CheckpointSigner {
  const privateKey = createPrivateKey(pem);
  const pub = describePublic(createPublicKey(privateKey));
  return {
    ...pub,
    sign: (statement) => ({
      alg: "Ed25519",
      keyId: pub.keyId,
      publicKey: pub.publicKey,
      value: sign(null, Buffer.from(statement, "utf8"), privateKey).toString("base64"),
    }),
  };
}

/** A public key from PEM (SPKI) text or base64 DER SPKI (as a checkpoint carries it). */
export function checkpointPublicKey(text: string): CheckpointPublicKey {
  const trimmed = text.trim();
  const key = trimmed.startsWith("-----BEGIN")
    ? createPublicKey(trimmed)
    : createPublicKey({ key: Buffer.from(trimmed, "base64"), format: "der", type: "spki" });
  return describePublic(key);
}

/** Whether `signature` is `key`'s signature of `statement`. */
export function verifyCheckpointStatement(statement: string, signature: CheckpointSignature, key: CheckpointPublicKey): boolean {
  if (signature.keyId !== key.keyId) return false;
  try {
    return verify(null, Buffer.from(statement, "utf8"), key.key, Buffer.from(signature.value, "base64"));
  } catch {
    return false;
  }
}

/** A new key pair in PEM: the private key (PKCS#8) for the projector, the public key (SPKI) for auditors. */
export function generateCheckpointKeyPair(): { privatePem: string; publicPem: string; keyId: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
    keyId: describePublic(publicKey).keyId,
  };
}
