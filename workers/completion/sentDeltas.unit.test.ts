import { describe, expect, it } from "vitest";
import type { DeltaMessage, EngineDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { foldDelivered } from "./resumption.ts";
import { SentDeltas } from "./sentDeltas.ts";

type DeltaOnly = Extract<DeltaMessage, { type: "delta" }>;

/** What the fold of the replay stream (resumption.ts) says of the same messages, as SentDeltas gives it. */
function folded(messages: DeltaOnly[]) {
  const delivered = foldDelivered(messages);
  return {
    output: delivered.content + delivered.toolText !== "",
    reasoning: delivered.reasoning,
    tokens: delivered.tokens,
    uncounted: delivered.uncounted,
  };
}

/** A seeded sequence of delta messages of every kind, numbered with gaps (other messages between). */
function messages(seed: number, count: number): DeltaOnly[] {
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  const out: DeltaOnly[] = [];
  let seq = 1;
  for (let i = 0; i < count; i++) {
    seq += 1 + next(2);
    const delta: EngineDeltaMessage = {};
    const kind = next(6);
    if (kind === 0) delta.reasoning = `r${i}`;
    if (kind === 1) delta.toolCalls = [{ index: 0, function: { name: i === 0 ? "f" : "", arguments: `a${i}` } }];
    if (kind === 2) delta.content = "";
    if (kind >= 3) delta.content = `c${i}`;
    const tokens = next(4) === 0 ? undefined : 1 + next(3);
    out.push(tokens === undefined ? { seq, type: "delta", delta } : { seq, type: "delta", delta, tokens });
  }
  return out;
}

describe("SentDeltas", () => {
  it("says what the messages through any number hold, as the replay stream's fold does", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const written = messages(seed, 40);
      const sent = new SentDeltas();
      for (const m of written) sent.record(m.seq, m.delta, m.tokens);
      expect(sent.count).toBe(written.length);
      for (let seq = -1; seq <= written.at(-1)!.seq + 1; seq++) {
        expect(sent.through(seq)).toEqual(folded(written.filter((m) => m.seq <= seq)));
      }
    }
  });

  it("holds nothing before the first message and for content that is empty", () => {
    const sent = new SentDeltas();
    expect(sent.through(10)).toEqual({ output: false, reasoning: "", tokens: 0, uncounted: "" });
    sent.record(3, { content: "" }, 1);
    sent.record(5, { content: "x" }, 2);
    expect(sent.through(4)).toEqual({ output: false, reasoning: "", tokens: 1, uncounted: "" });
    expect(sent.through(5)).toEqual({ output: true, reasoning: "", tokens: 3, uncounted: "" });
  });
});
