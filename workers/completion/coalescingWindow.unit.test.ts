import { describe, expect, it } from "vitest";
import { CoalescingWindow } from "./coalescingWindow.ts";

describe("CoalescingWindow", () => {
  it("widens the coalescing window with the number of open streams", () => {
    const window = new CoalescingWindow(4);
    expect(window.currentMs()).toBe(4);
    for (let i = 0; i < 64; i++) window.opened();
    expect(window.currentMs()).toBe(16);
    for (let i = 0; i < 1000; i++) window.opened();
    expect(window.currentMs()).toBe(50);
    for (let i = 0; i < 2000; i++) window.closed();
    expect(window.openStreams).toBe(0);
    expect(window.currentMs()).toBe(4);
    expect(new CoalescingWindow(0).currentMs()).toBe(0);
  });
});
