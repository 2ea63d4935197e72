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

  it("tells the caller whose read it is: its own (issued now) or one shared with an earlier caller", async () => {
    let clock = 0;
    const shared = new SharedReads<number>(5, () => clock);
    const first = shared.share("a", () => Promise.resolve(1));
    const second = shared.share("a", () => Promise.resolve(2));
    expect(first.own).toBe(true);
    expect(second.own).toBe(false);
    expect(await second.answer).toBe(1);
    clock = 5;
    const third = shared.share("a", () => Promise.resolve(3));
    expect(third.own).toBe(true);
    expect(await third.answer).toBe(3);
  });
});
