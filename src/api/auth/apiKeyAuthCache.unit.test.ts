import { describe, expect, it } from "vitest";
import { NO_RATE_LIMITS } from "../../ledger/accounts/accountEvents.ts";
import { ApiKeyAuthCache } from "./apiKeyAuthCache.ts";

describe("ApiKeyAuthCache", () => {
  const a = { accountId: "acc-a", keyId: "key-a", rateLimits: NO_RATE_LIMITS };
  const b = { accountId: "acc-b", keyId: "key-b", rateLimits: NO_RATE_LIMITS };

  it("serves an entry until its TTL passes", () => {
    let now = 0;
    const cache = new ApiKeyAuthCache({ ttlMs: 2000, nowMs: () => now });
    cache.set("h1", a, cache.generation());
    now = 1999;
    expect(cache.get("h1")).toEqual(a);
    now = 2000;
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("invalidates only the given account's entries", () => {
    const cache = new ApiKeyAuthCache({ ttlMs: 2000 });
    cache.set("h1", a, cache.generation());
    cache.set("h2", b, cache.generation());
    cache.invalidateAccount("acc-a");
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.get("h2")).toEqual(b);
  });

  it("drops a write from a lookup that started before an invalidation", () => {
    const cache = new ApiKeyAuthCache({ ttlMs: 2000 });
    const before = cache.generation();
    cache.invalidateAccount("acc-a");
    cache.set("h1", a, before);
    expect(cache.get("h1")).toBeUndefined();
    cache.set("h1", a, cache.generation());
    expect(cache.get("h1")).toEqual(a);
    cache.clear();
    expect(cache.get("h1")).toBeUndefined();
  });

  it("evicts the oldest entry when full", () => {
    const cache = new ApiKeyAuthCache({ ttlMs: 2000, maxEntries: 2 });
    cache.set("h1", a, cache.generation());
    cache.set("h2", b, cache.generation());
    cache.set("h3", a, cache.generation());
    expect(cache.size).toBe(2);
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.get("h3")).toEqual(a);
  });

  it("is due for refresh after half its TTL, and renewed by the next set", () => {
    let now = 0;
    const cache = new ApiKeyAuthCache({ ttlMs: 2000, nowMs: () => now });
    cache.set("h1", a, cache.generation());
    now = 999;
    expect(cache.dueForRefresh("h1")).toBe(false);
    now = 1000;
    expect(cache.dueForRefresh("h1")).toBe(true);
    cache.set("h1", a, cache.generation());
    expect(cache.dueForRefresh("h1")).toBe(false);
    now = 2999;
    expect(cache.get("h1")).toEqual(a);
    cache.delete("h1");
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.dueForRefresh("h1")).toBe(false);
  });
});
