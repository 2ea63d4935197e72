import { describe, expect, it } from "vitest";
import { apiKeyHash, apiKeyLast4, isWellFormedApiKey, maskedApiKey, newApiKeySecret } from "./apiKeySecret.ts";

describe("apiKeySecret", () => {
  it("creates sk- keys that pass their own checksum and are all different", () => {
    const keys = Array.from({ length: 200 }, () => newApiKeySecret());
    for (const key of keys) {
      expect(key).toMatch(/^sk-[0-9A-Za-z]{49}$/);
      expect(isWellFormedApiKey(key)).toBe(true);
    }
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("rejects a key whose body or checksum was changed", () => {
    const key = newApiKeySecret();
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === "a" ? "b" : "a") + s.slice(i + 1);
    expect(isWellFormedApiKey(flip(key, 10))).toBe(false);
    expect(isWellFormedApiKey(flip(key, key.length - 1))).toBe(false);
  });

  it("rejects malformed strings", () => {
    const key = newApiKeySecret();
    for (const bad of ["", "sk-", "garbage", key.slice(1), `${key}x`, key.replace("sk-", "pk-"), `${key.slice(0, -1)}!`, ` ${key}`]) {
      expect(isWellFormedApiKey(bad)).toBe(false);
    }
  });

  it("hashes with SHA-256 hex and masks with the last 4 characters", () => {
    const key = newApiKeySecret();
    expect(apiKeyHash(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(apiKeyHash(key)).not.toBe(apiKeyHash(newApiKeySecret()));
    const last4 = apiKeyLast4(key);
    expect(key.endsWith(last4)).toBe(true);
    expect(maskedApiKey(last4)).toBe(`sk-****************${last4}`);
  });
});
