import { describe, expect, it } from "vitest";
import { FairHashGate, PasswordHashingBusyError } from "./fairHashGate.ts";

/** A task that finishes when told to, recording its start. */
function controlled(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    task: async () => {
      log.push(name);
      await done;
      return name;
    },
    finish: () => finish(),
  };
}

const address = (key: string) => ({ key, knownDevice: false });
const device = (key: string) => ({ key, knownDevice: true });
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("FairHashGate", () => {
  it("runs at most `concurrency` tasks, serves waiting keys round-robin and refuses beyond the limits", async () => {
    const gate = new FairHashGate({ concurrency: 1, maxWaitingPerKey: 2, maxWaiting: 4 });
    const log: string[] = [];
    const a1 = controlled(log, "a1");
    const a2 = controlled(log, "a2");
    const a3 = controlled(log, "a3");
    const b1 = controlled(log, "b1");
    const results = [gate.run(address("a"), a1.task), gate.run(address("a"), a2.task), gate.run(address("a"), a3.task), gate.run(address("b"), b1.task)];
    await expect(gate.run(address("a"), async () => "a4")).rejects.toBeInstanceOf(PasswordHashingBusyError);
    await tick();
    expect(log).toEqual(["a1"]);
    a1.finish();
    await tick();
    expect(log).toEqual(["a1", "a2"]);
    a2.finish();
    await tick();
    // b waited behind a's second task only, not behind all of a's.
    expect(log).toEqual(["a1", "a2", "b1"]);
    b1.finish();
    await tick();
    a3.finish();
    expect(await Promise.all(results)).toEqual(["a1", "a2", "a3", "b1"]);
    expect(await gate.run(address("c"), async () => "free again")).toBe("free again");
  });

  it("frees the slot when a task fails", async () => {
    const gate = new FairHashGate({ concurrency: 1, maxWaitingPerKey: 1, maxWaiting: 1 });
    await expect(gate.run(address("a"), async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await gate.run(address("a"), async () => 1)).toBe(1);
  });

  it("keeps a known device's login apart: a flood from many addresses that fills their total refuses none of it", async () => {
    const gate = new FairHashGate({ concurrency: 1, maxWaitingPerKey: 2, maxWaiting: 4 });
    const log: string[] = [];
    const running = controlled(log, "x0");
    const flood = [controlled(log, "x1"), controlled(log, "y1"), controlled(log, "y2"), controlled(log, "z1")];
    const results = [gate.run(address("x"), running.task), ...flood.map((c, i) => gate.run(address(["x", "y", "y", "z"][i]!), c.task))];
    // The addresses' total is full: another address is refused, a known device waits its turn.
    await expect(gate.run(address("w"), async () => "w1")).rejects.toBeInstanceOf(PasswordHashingBusyError);
    const known = controlled(log, "d1");
    const deviceResult = gate.run(device("x"), known.task);
    // Its own limit per device still holds.
    await expect(Promise.all([gate.run(device("x"), async () => "d2"), gate.run(device("x"), async () => "d3")])).rejects.toBeInstanceOf(
      PasswordHashingBusyError,
    );
    running.finish();
    for (const c of flood) c.finish();
    known.finish();
    expect(await deviceResult).toBe("d1");
    await Promise.all(results);
    // Round-robin: the device waited behind one hash of each address that queued before it, not behind all.
    expect(log.indexOf("d1")).toBeLessThan(log.indexOf("y2"));
  });
});
