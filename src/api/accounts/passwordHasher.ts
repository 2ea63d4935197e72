import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

export type ScryptParams = { N: number; r: number; p: number };

/**
 * N=2^17, r=8, p=1: OWASP's minimum for scrypt (128 MiB, ~0.3-0.5 s per hash on one core). Every hash
 * carries its own parameters: older ones (N=2^15) still verify and are re-hashed with these on the next
 * successful login (needsRehash).
 */
export const DEFAULT_SCRYPT_PARAMS: ScryptParams = { N: 2 ** 17, r: 8, p: 1 };
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
/** `scrypt$N$r$p$<salt base64url>$<hash base64url>`: the parameters travel with the hash. */
const ENCODED = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_-]{16,128})\$([A-Za-z0-9_-]{16,256})$/;

function derive(password: string, salt: Buffer, params: ScryptParams, keyLength: number): Promise<Buffer> {
  // scrypt needs 128 * N * r bytes (128 MiB at the defaults); maxmem is the cap node checks that against.
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 1024 * 1024 };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize("NFC"), salt, keyLength, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** scrypt's work for the parameters, relative. */
function cost(params: ScryptParams): number {
  return params.N * params.r * params.p;
}

/** Derivations adding up to about `work` (scrypt's N·r·p), of halving N at the default r and p: none when it is not positive. */
async function padTo(work: number, password: string, salt: Buffer): Promise<void> {
  const { r, p } = DEFAULT_SCRYPT_PARAMS;
  let left = work;
  for (let N = DEFAULT_SCRYPT_PARAMS.N; N >= 2 && left > 0; N /= 2) {
    if (N * r * p > left) continue;
    await derive(password, salt, { N, r, p }, KEY_LENGTH);
    left -= N * r * p;
  }
}

function decode(encoded: string): { params: ScryptParams; salt: Buffer; hash: Buffer } | null {
  const m = ENCODED.exec(encoded);
  if (!m) return null;
  const params = { N: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
  const powerOfTwo = params.N > 1 && (params.N & (params.N - 1)) === 0;
  if (!powerOfTwo || params.N > 2 ** 20 || params.r < 1 || params.r > 32 || params.p < 1 || params.p > 16) return null;
  return { params, salt: Buffer.from(m[4]!, "base64url"), hash: Buffer.from(m[5]!, "base64url") };
}

/**
 * Password hashing with node:crypto scrypt and a random salt per password. The clear password is never
 * returned, stored or logged; verification compares in constant time.
 */
export const passwordHasher = {
  async hash(password: string, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): Promise<string> {
    const salt = randomBytes(SALT_LENGTH);
    const key = await derive(password, salt, params, KEY_LENGTH);
    return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString("base64url")}$${key.toString("base64url")}`;
  },

  /** True when a stored hash was made with other parameters than `params` (or cannot be read). */
  needsRehash(encoded: string, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): boolean {
    const decoded = decode(encoded);
    return !decoded || decoded.params.N !== params.N || decoded.params.r !== params.r || decoded.params.p !== params.p;
  },

  /**
   * True when the password matches. With `encoded` null (unknown account) it still derives a key with the
   * default parameters and answers false, so "no such account" costs as much as "wrong password".
   */
  async verify(password: string, encoded: string | null): Promise<boolean> {
    const decoded = encoded === null ? null : decode(encoded);
    if (!decoded) {
      const dummy = Buffer.alloc(KEY_LENGTH);
      const key = await derive(password, Buffer.alloc(SALT_LENGTH), DEFAULT_SCRYPT_PARAMS, KEY_LENGTH);
      timingSafeEqual(key, dummy);
      return false;
    }
    const key = await derive(password, decoded.salt, decoded.params, decoded.hash.length);
    const matches = timingSafeEqual(key, decoded.hash);
    // A wrong password against a hash cheaper than the defaults (an older one, re-hashed only on a
    // successful login) costs what an unknown account's does: the difference is made up, so the
    // answer's time does not tell that the account exists.
    if (!matches) await padTo(cost(DEFAULT_SCRYPT_PARAMS) - cost(decoded.params), password, decoded.salt);
    return matches;
  },
};
