import {
  type CheckpointPublicKey,
  type CheckpointSignature,
  type CheckpointStatementFields,
  checkpointPublicKey,
  checkpointStatement,
  verifyCheckpointStatement,
} from "../../src/ledger/audit/checkpointSignature.ts";

/**
 * The keys checkpoint signatures are checked against. `trusted`: keys the auditor gave (--public-key,
 * AUDIT_PUBLIC_KEY_PATH); when there are none, each checkpoint is checked against the key it carries,
 * which shows it was not changed since it was signed but not who signed it (the report says so).
 */
export class CheckpointKeys {
  readonly trusted: CheckpointPublicKey[];
  readonly #embedded = new Map<string, CheckpointPublicKey | null>();

  constructor(trusted: CheckpointPublicKey[]) {
    this.trusted = trusted;
  }

  /** Null when the signature verifies, else why not. */
  problem(checkpoint: number, fields: CheckpointStatementFields, signature: CheckpointSignature): string | null {
    const key = this.trusted.length ? this.trusted.find((k) => k.keyId === signature.keyId) : this.#embeddedKey(signature);
    if (!key) {
      return this.trusted.length
        ? `signed by key ${signature.keyId}, which is not a key you trust (${this.trusted.map((k) => k.keyId).join(", ")})`
        : `the public key it carries is not a valid Ed25519 key with id ${signature.keyId}`;
    }
    return verifyCheckpointStatement(checkpointStatement(checkpoint, fields), signature, key)
      ? null
      : `the signature does not verify: the checkpoint (its window, count, heads' Merkle root or accounts root) changed after it was signed by ${signature.keyId}`;
  }

  #embeddedKey(signature: CheckpointSignature): CheckpointPublicKey | null {
    if (!this.#embedded.has(signature.publicKey)) {
      let key: CheckpointPublicKey | null = null;
      try {
        key = checkpointPublicKey(signature.publicKey);
      } catch {
        key = null;
      }
      this.#embedded.set(signature.publicKey, key && key.keyId === signature.keyId ? key : null);
    }
    return this.#embedded.get(signature.publicKey)!;
  }
}
