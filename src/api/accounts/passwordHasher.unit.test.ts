import { describe, expect, it } from "vitest";
import { passwordHasher } from "./passwordHasher.ts";

const fast = { N: 2 ** 10, r: 8, p: 1 };

describe("passwordHasher", () => {
  it("encodes the parameters and a random salt, never the password", async () => {
    const a = await passwordHasher.hash("correct horse battery", fast);
    const b = await passwordHasher.hash("correct horse battery", fast);
    expect(a).toMatch(/^scrypt\$1024\$8\$1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain("correct horse battery");
  });

  it("verifies the right password and refuses a wrong one", async () => {
    const encoded = await passwordHasher.hash("correct horse battery", fast);
    expect(await passwordHasher.verify("correct horse battery", encoded)).toBe(true);
    expect(await passwordHasher.verify("correct horse batterz", encoded)).toBe(false);
    expect(await passwordHasher.verify("", encoded)).toBe(false);
  });

  it("uses the default parameters when none are given", async () => {
    const encoded = await passwordHasher.hash("correct horse battery");
    expect(encoded.startsWith("scrypt$131072$8$1$")).toBe(true);
    expect(await passwordHasher.verify("correct horse battery", encoded)).toBe(true);
    expect(passwordHasher.needsRehash(encoded)).toBe(false);
  });

  it("still verifies an older N=2^15 hash, and says it needs re-hashing", async () => {
    const old = await passwordHasher.hash("correct horse battery", { N: 2 ** 15, r: 8, p: 1 });
    expect(await passwordHasher.verify("correct horse battery", old)).toBe(true);
    expect(passwordHasher.needsRehash(old)).toBe(true);
    expect(passwordHasher.needsRehash("not a hash")).toBe(true);
  });

  it("answers false for an unknown account (no hash) and for a malformed hash", async () => {
    expect(await passwordHasher.verify("correct horse battery", null)).toBe(false);
    expect(await passwordHasher.verify("correct horse battery", "plain-text-password")).toBe(false);
    expect(await passwordHasher.verify("x", "scrypt$3$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA")).toBe(false);
  });
});
