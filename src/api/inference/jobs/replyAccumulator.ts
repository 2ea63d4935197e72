import type { EngineDeltaMessage } from "../../../contracts/deltaMessage.ts";

type TokenLogprob = NonNullable<EngineDeltaMessage["logprobs"]>[number];
export type AssembledToolCall = { id: string; type: "function"; function: { name: string; arguments: string } };

/** Collects a completion's deltas into the whole reply, for non-streaming answers. */
export class ReplyAccumulator {
  content = "";
  reasoning = "";
  logprobs: TokenLogprob[] = [];
  readonly #toolCalls = new Map<number, AssembledToolCall>();

  add(delta: EngineDeltaMessage): void {
    if (delta.content) this.content += delta.content;
    if (delta.reasoning) this.reasoning += delta.reasoning;
    if (delta.logprobs?.length) this.logprobs.push(...delta.logprobs);
    for (const piece of delta.toolCalls ?? []) {
      let call = this.#toolCalls.get(piece.index);
      if (!call) {
        call = { id: "", type: "function", function: { name: "", arguments: "" } };
        this.#toolCalls.set(piece.index, call);
      }
      if (piece.id) call.id = piece.id;
      if (piece.function?.name) call.function.name += piece.function.name;
      if (piece.function?.arguments) call.function.arguments += piece.function.arguments;
    }
  }

  get toolCalls(): AssembledToolCall[] {
    return [...this.#toolCalls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  }
}
