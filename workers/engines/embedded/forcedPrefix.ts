import { TokenBias, type LlamaModel, type Token } from "node-llama-cpp";
import { EngineError } from "../engine.ts";

/** Text already sent of a reply held to a grammar, and the tokens it is generated again as. */
export type ForcedPrefix = { text: string; tokens: Token[] };

/**
 * Added to the logit of the next token of a forced prefix. Logits of a model are tens at most; this one
 * stays ahead of every other token after any temperature (2 divides it by 2), repetition penalty or
 * top-k/top-p/min-p cut, so it is sampled whatever the seed. The grammar still applies: a token it does
 * not allow there keeps a logit of -infinity (the replay then diverges and is refused).
 */
export const FORCED_TOKEN_LOGIT = 1e4;

/**
 * Continues a reply held to a grammar (response_format, a forced tool call) that a worker began and
 * died during: the generation runs again from the start under the same grammar, and its first tokens
 * are forced, one at a time through the sampler's token bias, to the tokens of the text already sent.
 * The grammar (which works on text) advances over them as over any sampled token, so what follows is
 * generated as the continuation of that text. The replayed text is checked to be exactly what was
 * sent and is not sent again; should it differ, the generation is refused rather than splice two.
 */
export class PrefixReplay {
  readonly #prefix: ForcedPrefix;
  readonly #forced: TokenBias[];
  readonly #own: TokenBias;
  /** Generated text matched against the prefix so far (up to its length). */
  #matched = 0;
  #error: EngineError | null = null;

  constructor(model: LlamaModel, prefix: ForcedPrefix, own: TokenBias | undefined) {
    this.#prefix = prefix;
    this.#forced = prefix.tokens.map((token) => new TokenBias(model.tokenizer).set(token, { logit: FORCED_TOKEN_LOGIT }));
    this.#own = own ?? new TokenBias(model.tokenizer);
  }

  /** Tokens forced (generated again, not new). */
  get forcedTokens(): number {
    return this.#prefix.tokens.length;
  }

  /** The bias to sample with after `sampled` tokens: the next prefix token forced, then the request's own. */
  bias(sampled: number): TokenBias {
    return this.#forced[sampled] ?? this.#own;
  }

  /** The part of a generated chunk of text that follows the prefix ("" while the prefix is replayed). */
  pass(text: string): string {
    if (this.#error !== null) return "";
    const want = this.#prefix.text.length - this.#matched;
    if (want <= 0) return text;
    const head = text.slice(0, want);
    if (this.#prefix.text.slice(this.#matched, this.#matched + head.length) !== head) {
      this.#error = diverged();
      return "";
    }
    this.#matched += head.length;
    return text.slice(head.length);
  }

  /** The replay went wrong: generated text differed from the prefix. */
  get error(): EngineError | null {
    return this.#error;
  }

  /** Throws unless the whole prefix was replayed as sent (call when the generation ended). */
  checkReplayed(): void {
    if (this.#error !== null) throw this.#error;
    if (this.#matched < this.#prefix.text.length) {
      this.#error = diverged();
      throw this.#error;
    }
  }
}

function diverged(): EngineError {
  return new EngineError("internal", "The text already sent could not be generated again under the response's grammar, so the response cannot be continued");
}
