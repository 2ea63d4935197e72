import { describe, expect, it } from "vitest";
import { SlotPool } from "./slotPool.ts";

describe("SlotPool", () => {
  it("hands out free slots and makes further jobs wait in order", async () => {
    const pool = new SlotPool(["a"]);
    const signal = new AbortController().signal;
    const first = await pool.acquire(signal);
    const order: string[] = [];
    const second = pool.acquire(signal).then((slot) => order.push(`second:${slot}`));
    const third = pool.acquire(signal).then((slot) => order.push(`third:${slot}`));
    expect(pool.waiting).toBe(2);
    pool.release(first);
    await second;
    pool.release("a");
    await third;
    expect(order).toEqual(["second:a", "third:a"]);
  });

  it("rejects a waiting job when its signal aborts, without losing the slot", async () => {
    const pool = new SlotPool([1]);
    const held = await pool.acquire(new AbortController().signal);
    const controller = new AbortController();
    const waiting = pool.acquire(controller.signal);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ name: "AbortError" });
    expect(pool.waiting).toBe(0);
    pool.release(held);
    expect(pool.freeSlots).toBe(1);
  });

  it("releases the slot when the job throws", async () => {
    const pool = new SlotPool([1]);
    await expect(pool.use(new AbortController().signal, async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(pool.freeSlots).toBe(1);
  });

  it("rejects waiting and new jobs once closed", async () => {
    const pool = new SlotPool<number>([]);
    const waiting = pool.acquire(new AbortController().signal);
    pool.close();
    await expect(waiting).rejects.toThrow("closed");
    await expect(pool.acquire(new AbortController().signal)).rejects.toThrow("closed");
  });

  it("gives a job the free slot it prefers, and the last released one without a preference", async () => {
    const pool = new SlotPool(["short", "longest", "none"]);
    const signal = new AbortController().signal;
    const prefix: Record<string, number> = { short: 2, longest: 9, none: 0 };
    expect(await pool.acquire(signal, (slot) => prefix[slot]!)).toBe("longest");
    expect(await pool.acquire(signal)).toBe("none");
    pool.release("none");
    pool.release("longest");
    expect(await pool.acquire(signal)).toBe("longest");
  });
});
