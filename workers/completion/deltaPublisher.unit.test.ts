import { describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { EngineDelta } from "../engines/engine.ts";
import { CoalescingWindow } from "./coalescingWindow.ts";
import { DeltaPublisher } from "./deltaPublisher.ts";
import type { TurnMessage, TurnWriter } from "./turnWriter.ts";

/** The messages' JSON texts as the TurnWriter gets them (what goes to the replay stream and the reply channel). */
function recordingPublisher(clock: { now: number }) {
  const texts: string[] = [];
  const writer = {
    write: (message: TurnMessage) => {
      texts.push(message.messageJson);
      return Promise.resolve();
    },
  } as unknown as TurnWriter;
  const publisher = new DeltaPublisher(
    new InferenceKeys("unit"),
    { completionId: "c1", replyTo: "r" },
    { window: new CoalescingWindow(60_000), writer, replayTtlSeconds: 60, replayMaxLen: 100, now: () => clock.now },
  );
  return { publisher, texts };
}

describe("DeltaPublisher messages", () => {
  it("writes each delta message's JSON as before: delta without its count, the count beside it, then the number", async () => {
    const clock = { now: 1000 };
    const { publisher, texts } = recordingPublisher(clock);
    publisher.send({ type: "started" });
    publisher.delta({ content: "Hel", tokens: 1 });
    clock.now += 1;
    publisher.delta({ content: "lo", tokens: 2 });
    publisher.delta({ reasoning: "hm", content: " you", tokens: 1 });
    publisher.flush();
    publisher.delta({ content: "!" });
    publisher.flush();
    await publisher.close();
    expect(texts).toEqual([
      '{"type":"started","seq":0}',
      '{"type":"delta","delta":{"content":"Hel"},"tokens":1,"seq":1}',
      '{"type":"delta","delta":{"content":"lo you","reasoning":"hm"},"tokens":3,"seq":2}',
      '{"type":"delta","delta":{"content":"!"},"seq":3}',
    ]);
  });

  it("neither keeps nor changes the engine's deltas (one object passed again and again)", async () => {
    const clock = { now: 1000 };
    const { publisher, texts } = recordingPublisher(clock);
    const same: EngineDelta = { content: "a", toolCalls: [{ index: 0, function: { arguments: "x" } }], tokens: 1 };
    for (let i = 0; i < 4; i++) publisher.delta(same);
    await publisher.close();
    expect(same).toEqual({ content: "a", toolCalls: [{ index: 0, function: { arguments: "x" } }], tokens: 1 });
    expect(texts.map((text) => JSON.parse(text))).toEqual([
      { type: "delta", delta: { content: "a", toolCalls: [{ index: 0, function: { arguments: "x" } }] }, tokens: 1, seq: 0 },
      { type: "delta", delta: { content: "aaa", toolCalls: [{ index: 0, function: { arguments: "xxx" } }] }, tokens: 3, seq: 1 },
    ]);
  });

  it("says what its delta messages through a number hold (merged deltas as the one message they became)", async () => {
    const clock = { now: 1000 };
    const { publisher } = recordingPublisher(clock);
    publisher.send({ type: "started" });
    publisher.delta({ content: "a", tokens: 2 });
    publisher.delta({ content: "b", tokens: 1 });
    publisher.delta({ reasoning: "r", tokens: 4 });
    publisher.flush();
    publisher.delta({ content: "c" });
    await publisher.close();
    expect(publisher.sentThrough(0)).toEqual({ output: false, reasoning: "", tokens: 0, uncounted: "" });
    expect(publisher.sentThrough(1)).toEqual({ output: true, reasoning: "", tokens: 2, uncounted: "" });
    expect(publisher.sentThrough(2)).toEqual({ output: true, reasoning: "r", tokens: 7, uncounted: "" });
    expect(publisher.sentThrough(3)).toEqual({ output: true, reasoning: "r", tokens: 7, uncounted: "c" });
  });
});

describe("DeltaPublisher coalescing", () => {
  function publisherWithWindow(clock: { now: number }, windowMs: number) {
    const texts: string[] = [];
    const writer = {
      write: (message: TurnMessage) => {
        texts.push(message.messageJson);
        return Promise.resolve();
      },
    } as unknown as TurnWriter;
    const window = new CoalescingWindow(windowMs);
    const publisher = new DeltaPublisher(
      new InferenceKeys("unit"),
      { completionId: "c1", replyTo: "r" },
      { window, writer, replayTtlSeconds: 60, replayMaxLen: 100, now: () => clock.now },
    );
    return { publisher, texts, window };
  }

  it("writes each token of a stream whose tokens come half a window apart or more at once (never held behind its last write)", async () => {
    const clock = { now: 1000 };
    const { publisher, texts } = publisherWithWindow(clock, 50);
    // 30 ms a token against a 50 ms window: without the rule, every second token waited for the window.
    for (let i = 0; i < 6; i++) {
      publisher.delta({ content: `t${i}`, tokens: 1 });
      expect(texts).toHaveLength(i + 1);
      clock.now += 30;
    }
    await publisher.close();
    expect(texts).toHaveLength(6);
  });

  it("still merges the tokens of a fast stream (closer than half a window) until its window has passed", async () => {
    const clock = { now: 1000 };
    const { publisher, texts } = publisherWithWindow(clock, 50);
    publisher.delta({ content: "a", tokens: 1 });
    for (const content of ["b", "c", "d"]) {
      clock.now += 10;
      publisher.delta({ content, tokens: 1 });
    }
    expect(texts).toHaveLength(1);
    publisher.flush();
    await publisher.close();
    expect(texts.map((text) => JSON.parse(text).delta.content)).toEqual(["a", "bcd"]);
  });
});
