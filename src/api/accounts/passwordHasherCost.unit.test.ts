import { describe, expect, it, vi } from "vitest";

const derivations = vi.hoisted(() => [] as number[]);
vi.mock("node:crypto", async (importOriginal) => {
  const crypto = await importOriginal<typeof import("node:crypto")>();
  return {
    ...crypto,
    scrypt: ((password: string, salt: Buffer, keyLength: number, options: { N: number }, callback: (error: Error | null, key: Buffer) => void) => {
      derivations.push(options.N);
      crypto.scrypt(password, salt, keyLength, options, callback);
    }) as typeof crypto.scrypt,
  };
});

const { DEFAULT_SCRYPT_PARAMS, passwordHasher } = await import("./passwordHasher.ts");

/**
 * What a failed login costs, counted in scrypt derivations and their N (not timed): never less than an
 * unknown account's one default derivation, so the answer's time does not tell that an account exists.
 */
describe("passwordHasher.verify: the work of a refusal", () => {
  const cheap = { N: 2 ** 10, r: 8, p: 1 };

  it("an unknown account: one derivation at the default N", async () => {
    derivations.length = 0;
    expect(await passwordHasher.verify("wrong", null)).toBe(false);
    expect(derivations).toEqual([DEFAULT_SCRYPT_PARAMS.N]);
  });

  it("a wrong password against a cheaper, older hash: its own derivation, then as much again as makes up the default's work", async () => {
    const old = await passwordHasher.hash("right", cheap);
    derivations.length = 0;
    expect(await passwordHasher.verify("wrong", old)).toBe(false);
    expect(derivations[0]).toBe(cheap.N);
    // r and p as the defaults': the work is the sum of N, exactly the default's.
    expect(derivations.reduce((sum, n) => sum + n, 0)).toBe(DEFAULT_SCRYPT_PARAMS.N);
    derivations.length = 0;
    expect(await passwordHasher.verify("right", old)).toBe(true);
    expect(derivations).toEqual([cheap.N]);
  });
});
