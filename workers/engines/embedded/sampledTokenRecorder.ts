import type { LlamaContextSequence, SequenceEvaluateOptions, Token } from "node-llama-cpp";

type Sampled = { token: Token; probabilities: Map<Token, number> | undefined };
type Evaluate = LlamaContextSequence["evaluate"];

/**
 * Observes every token the model samples on one sequence while LlamaChat generates, by routing the sequence's
 * `evaluate` through `evaluateWithMetadata` (LlamaChat offers no hook for token probabilities). Counts the sampled
 * tokens (the exact completion token count) and, when asked, keeps each token's probability distribution so
 * logprobs can be matched to the text chunks LlamaChat emits. `uninstall()` restores the sequence.
 */
export class SampledTokenRecorder {
  readonly #queue: Sampled[] = [];
  /** Every sampled token, in order, and how many of them were emitted in chunks (emitted()). */
  readonly #tokens: Token[] = [];
  #emittedThrough = 0;
  readonly #sequence: LlamaContextSequence;
  readonly #hadOwnEvaluate: boolean;
  readonly #original: Evaluate;
  #sampled = 0;

  constructor(sequence: LlamaContextSequence, withProbabilities: boolean) {
    this.#sequence = sequence;
    this.#hadOwnEvaluate = Object.hasOwn(sequence, "evaluate");
    this.#original = sequence.evaluate;
    const record = (token: Token, probabilities: Map<Token, number> | undefined): void => {
      this.#sampled += 1;
      this.#tokens.push(token);
      if (withProbabilities) this.#queue.push({ token, probabilities });
    };
    const evaluate = (tokens: Token[], options?: SequenceEvaluateOptions): AsyncGenerator<Token, void, undefined | Token | Token[]> => {
      const inner = sequence.evaluateWithMetadata(tokens, { probabilities: withProbabilities }, options);
      return (async function* () {
        try {
          let step = await inner.next();
          while (step.done !== true) {
            const { token } = step.value;
            record(token, "probabilities" in step.value ? (step.value.probabilities as Map<Token, number>) : undefined);
            const replacement: undefined | Token | Token[] = yield token;
            step = await inner.next(replacement);
          }
        } finally {
          await inner.return(undefined);
        }
      })();
    };
    sequence.evaluate = evaluate;
  }

  /** Tokens sampled so far (the end-of-generation token included). */
  get sampledTokens(): number {
    return this.#sampled;
  }

  /**
   * The distribution each emitted token was sampled from, in order. Sampled tokens that were never emitted
   * (held back as part of a stop sequence, or template syntax) are skipped; tokens that were injected rather
   * than sampled get no entry.
   */
  take(tokens: readonly Token[]): { token: Token; probabilities: Map<Token, number> }[] {
    const out: { token: Token; probabilities: Map<Token, number> }[] = [];
    for (const token of tokens) {
      const index = this.#queue.findIndex((entry) => entry.token === token);
      if (index < 0) continue;
      const [entry] = this.#queue.splice(0, index + 1).slice(-1);
      if (entry?.probabilities !== undefined) out.push({ token, probabilities: entry.probabilities });
    }
    return out;
  }

  /** Tokens LlamaChat emitted in a chunk (text or thought): the sampled tokens up to the last of them were delivered. */
  emitted(tokens: readonly Token[]): void {
    for (const token of tokens) {
      const index = this.#tokens.indexOf(token, this.#emittedThrough);
      if (index >= 0) this.#emittedThrough = index + 1;
    }
  }

  /**
   * The sampled tokens after the last emitted one: what LlamaChat still held back when it stopped (the
   * start of a possible stop sequence, or bytes of an unfinished UTF-8 character), and the tokens before
   * them (for the detokenizer's context). Marks them emitted.
   */
  takeHeld(): { held: Token[]; before: Token[] } {
    const held = this.#tokens.slice(this.#emittedThrough);
    const before = this.#tokens.slice(Math.max(0, this.#emittedThrough - 8), this.#emittedThrough);
    this.#emittedThrough = this.#tokens.length;
    return { held, before };
  }

  uninstall(): void {
    if (this.#hadOwnEvaluate) this.#sequence.evaluate = this.#original;
    else Reflect.deleteProperty(this.#sequence, "evaluate");
  }
}
