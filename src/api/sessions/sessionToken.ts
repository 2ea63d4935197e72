import { createHash, randomBytes } from "node:crypto";

/** Session tokens: `sess_` + 256 random bits, base64url. Only their SHA-256 is stored. */
export function newSessionToken(): string {
  return `sess_${randomBytes(32).toString("base64url")}`;
}

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
