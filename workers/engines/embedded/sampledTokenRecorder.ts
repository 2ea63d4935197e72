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

  uninstall(): void {
    if (this.#hadOwnEvaluate) this.#sequence.evaluate = this.#original;
    else Reflect.deleteProperty(this.#sequence, "evaluate");
  }
}
