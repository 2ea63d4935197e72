import { describe, expect, it } from "vitest";
import { countListeners, listenerField } from "./completionListeners.ts";

const NOW = 1_000_000;
const running = (process: string) => [process, NOW + 5_000] as const;
const stoppedAt = (process: string, at: number) => [process, at] as const;

describe("the listeners of a completion, counted per API process", () => {
  it("counts the clients of running processes only", () => {
    const fields = { meta: "{}", [listenerField("a")]: "2", [listenerField("b")]: "1" };
    expect(countListeners(fields, new Map([running("a"), stoppedAt("b", NOW - 100)]), NOW)).toEqual({ live: 2, leftAt: null });
  });

  it("a process that stopped beating with clients: they left when its beat expired (the latest such process)", () => {
    const fields = { [listenerField("a")]: "1", [listenerField("b")]: "3" };
    expect(countListeners(fields, new Map([stoppedAt("a", NOW - 9_000), stoppedAt("b", NOW - 2_000)]), NOW)).toEqual({ live: 0, leftAt: NOW - 2_000 });
  });

  it("a running process whose clients left, or a process no longer known: when they left is unknown", () => {
    expect(countListeners({ [listenerField("a")]: "0", [listenerField("b")]: "1" }, new Map([running("a"), stoppedAt("b", NOW - 1)]), NOW)).toEqual({
      live: 0,
      leftAt: null,
    });
    expect(countListeners({ [listenerField("gone")]: "1" }, new Map(), NOW)).toEqual({ live: 0, leftAt: null });
  });

  it("a record of the earlier format (one count, its process unknown) counts as listening", () => {
    expect(countListeners({ meta: "{}", listeners: "1" }, new Map(), NOW)).toEqual({ live: 1, leftAt: null });
    expect(countListeners({ meta: "{}", listeners: "0" }, new Map(), NOW)).toEqual({ live: 0, leftAt: null });
  });

  it("nobody attached at all: no listener, no known leaving", () => {
    expect(countListeners({ meta: "{}" }, new Map([running("a")]), NOW)).toEqual({ live: 0, leftAt: null });
  });
});
