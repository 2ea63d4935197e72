import { describe, expect, it } from "vitest";
import { RefusedKeyCache } from "./refusedKeyCache.ts";

describe("RefusedKeyCache", () => {
  it("answers a refusal until its TTL passes", () => {
    let now = 0;
    const cache = new RefusedKeyCache({ ttlMs: 1000, nowMs: () => now });
    cache.set("h1", cache.generation());
    now = 999;
    expect(cache.has("h1")).toBe(true);
    now = 1000;
    expect(cache.has("h1")).toBe(false);
  });

  it("forgets everything on clear, and drops a write from a lookup that started before it", () => {
    const cache = new RefusedKeyCache({ ttlMs: 1000 });
    cache.set("h1", cache.generation());
    const before = cache.generation();
    cache.clear();
    expect(cache.has("h1")).toBe(false);
    cache.set("h2", before);
    expect(cache.has("h2")).toBe(false);
  });

  it("keeps at most maxEntries, dropping the oldest", () => {
    const cache = new RefusedKeyCache({ ttlMs: 1000, maxEntries: 2 });
    for (const hash of ["a", "b", "c"]) cache.set(hash, cache.generation());
    expect(cache.size).toBe(2);
    expect(cache.has("a")).toBe(false);
    expect(cache.has("c")).toBe(true);
  });
});
