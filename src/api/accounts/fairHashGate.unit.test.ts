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

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("FairHashGate", () => {
  it("runs at most `concurrency` tasks, serves waiting keys round-robin and refuses beyond the limits", async () => {
    const gate = new FairHashGate({ concurrency: 1, maxWaitingPerKey: 2, maxWaiting: 4 });
    const log: string[] = [];
    const a1 = controlled(log, "a1");
    const a2 = controlled(log, "a2");
    const a3 = controlled(log, "a3");
    const b1 = controlled(log, "b1");
    const results = [gate.run("a", a1.task), gate.run("a", a2.task), gate.run("a", a3.task), gate.run("b", b1.task)];
    await expect(gate.run("a", async () => "a4")).rejects.toBeInstanceOf(PasswordHashingBusyError);
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
    expect(await gate.run("c", async () => "free again")).toBe("free again");
  });

  it("frees the slot when a task fails", async () => {
    const gate = new FairHashGate({ concurrency: 1, maxWaitingPerKey: 1, maxWaiting: 1 });
    await expect(gate.run("a", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await gate.run("a", async () => 1)).toBe(1);
  });
});
