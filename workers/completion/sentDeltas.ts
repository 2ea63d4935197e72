import type { EngineDeltaMessage } from "../../src/contracts/deltaMessage.ts";

/** What delta messages hold, as a failed or cancelled run charges it (the fold of resumption.ts, less the text it does not count). */
export type SentOutput = {
  /** Some content or tool call was sent (its text is not kept: it is charged by the token counts). */
  output: boolean;
  /** The reasoning text, counted with the tokenizer for the reasoning tokens. */
  reasoning: string;
  /** Completion tokens of the messages that carry their count, summed. */
  tokens: number;
  /** The text (reasoning, content, tool calls) of the messages without a count: counted with the tokenizer. */
  uncounted: string;
};

/** A message with reasoning or without a token count: its text is kept. */
type KeptText = { index: number; reasoning: string; uncounted: string };

/**
 * The delta messages a publisher wrote, kept as what a client can have been sent (for the charge of a
 * request the API ended early, up to the message it says it delivered), without keeping the messages:
 * per message its number and the token count summed through it, in two arrays of small integers. Text
 * is kept only where it is charged by counting it (reasoning, messages written without a count). A
 * streamed reply of plain content thus leaves nothing per token for the garbage collector to trace and
 * copy while the job runs, where the messages themselves, their deltas and their concatenated text did.
 */
export class SentDeltas {
  /** The number (seq) of each delta message, in the order written (increasing). */
  readonly #seqs: number[] = [];
  /** The tokens of the messages through each one, summed. */
  readonly #tokensThrough: number[] = [];
  /** The first message with content or a tool call (an index), or -1. */
  #firstOutput = -1;
  readonly #texts: KeptText[] = [];

  get count(): number {
    return this.#seqs.length;
  }

  /** A delta message was written: number `seq`, its delta and the tokens it carries (undefined: not counted). */
  record(seq: number, delta: EngineDeltaMessage, tokens: number | undefined): void {
    const index = this.#seqs.length;
    this.#seqs.push(seq);
    this.#tokensThrough.push((index === 0 ? 0 : this.#tokensThrough[index - 1]!) + (tokens ?? 0));
    let text = delta.content ?? "";
    if (delta.toolCalls) for (const call of delta.toolCalls) text += (call.function?.name ?? "") + (call.function?.arguments ?? "");
    if (this.#firstOutput === -1 && text !== "") this.#firstOutput = index;
    const reasoning = delta.reasoning ?? "";
    const uncounted = tokens === undefined ? reasoning + text : "";
    if (reasoning !== "" || uncounted !== "") this.#texts.push({ index, reasoning, uncounted });
  }

  /** What the messages numbered up to `seq` hold. */
  through(seq: number): SentOutput {
    // The messages through `seq`: the first `count` (numbers increase).
    let low = 0;
    let high = this.#seqs.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#seqs[middle]! <= seq) low = middle + 1;
      else high = middle;
    }
    const count = low;
    let reasoning = "";
    let uncounted = "";
    for (const kept of this.#texts) {
      if (kept.index >= count) break;
      reasoning += kept.reasoning;
      uncounted += kept.uncounted;
    }
    return {
      output: this.#firstOutput !== -1 && this.#firstOutput < count,
      reasoning,
      tokens: count === 0 ? 0 : this.#tokensThrough[count - 1]!,
      uncounted,
    };
  }
}
