import { describe, expect, it } from "vitest";
import { SharedReads } from "./sharedReads.ts";

describe("SharedReads", () => {
  it("shares one read per key within the window, and reads again after it", async () => {
    let clock = 0;
    let reads = 0;
    const shared = new SharedReads<number>(5, () => clock);
    const read = () => Promise.resolve(++reads);
    expect(await shared.get("a", read)).toBe(1);
    clock = 4.9;
    expect(await shared.get("a", read)).toBe(1);
    expect(await shared.get("b", read)).toBe(2);
    clock = 5;
    expect(await shared.get("a", read)).toBe(3);
    expect(reads).toBe(3);
  });

  it("does not share a failed read", async () => {
    let reads = 0;
    const shared = new SharedReads<number>(1_000, () => 0);
    const failing = shared.get("a", () => {
      reads++;
      return Promise.reject(new Error("away"));
    });
    await expect(failing).rejects.toThrow("away");
    expect(await shared.get("a", () => Promise.resolve(++reads))).toBe(2);
  });
});
