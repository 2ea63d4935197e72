import { createHash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";

/**
 * API key secrets: `sk-` + 43 random base62 characters (about 256 bits) + 6 base62 characters of the
 * CRC32 of those 43 (a checksum, so a mistyped or made-up key is refused without a database query).
 * Only the SHA-256 hex of the whole secret is ever stored.
 */
export const API_KEY_PREFIX = "sk-";
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const WELL_FORMED = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

/** Uniform random base62 characters (rejection sampling: bytes >= 248 are dropped, so no modulo bias). */
function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= 248) continue;
      out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A 32-bit number as exactly `CHECKSUM_LENGTH` base62 characters (62^6 > 2^32). */
function base62Fixed(value: number): string {
  let n = value >>> 0;
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62]! + out;
    n = Math.floor(n / 62);
  }
  return out;
}

function checksumOf(body: string): string {
  return base62Fixed(crc32(body));
}

export function newApiKeySecret(): string {
  const body = randomBase62(BODY_LENGTH);
  return `${API_KEY_PREFIX}${body}${checksumOf(body)}`;
}

/** Shape and checksum only: no database, no secret comparison. */
export function isWellFormedApiKey(candidate: string): boolean {
  if (!WELL_FORMED.test(candidate)) return false;
  const body = candidate.slice(API_KEY_PREFIX.length, API_KEY_PREFIX.length + BODY_LENGTH);
  return candidate.slice(API_KEY_PREFIX.length + BODY_LENGTH) === checksumOf(body);
}

/** What is stored and looked up: hex SHA-256 of the full secret. */
export function apiKeyHash(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

export function apiKeyLast4(secret: string): string {
  return secret.slice(-4);
}

/** `sk-` + a fixed run of asterisks + the last 4 characters (the length of the secret is not revealed). */
export function maskedApiKey(last4: string): string {
  return `${API_KEY_PREFIX}${"*".repeat(16)}${last4}`;
}
