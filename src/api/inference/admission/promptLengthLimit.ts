import type { CompletionWork, Endpoint } from "../../../contracts/completionJob.ts";
import { InvalidRequestError } from "../../http/errors.ts";

/**
 * Characters one prompt token may stand for, at most, in this check. Prose averages about 4 characters a
 * token and code 3 to 5; a prompt above 8 per token of the context cannot fit it in practice.
 */
export const MAX_PROMPT_CHARS_PER_TOKEN = 8;

/** The longest prompt text (characters) a model with this context length is sent. */
export function maxPromptChars(contextLength: number): number {
  return contextLength * MAX_PROMPT_CHARS_PER_TOKEN;
}

/**
 * Characters of every string (and object key) in a value, walked with an explicit stack (no recursion, so
 * any nesting depth is safe), stopping as soon as the sum passes `limit`.
 */
export function textLengthUpTo(value: unknown, limit: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && total <= limit) {
    const item = stack.pop();
    if (typeof item === "string") total += item.length;
    else if (Array.isArray(item)) for (const element of item) stack.push(element);
    else if (item !== null && typeof item === "object") {
      for (const [key, element] of Object.entries(item)) {
        total += key.length;
        stack.push(element);
      }
    }
  }
  return total;
}

const PROMPT_PARAM: Record<Endpoint, string> = { "chat.completions": "messages", completions: "prompt", embeddings: "input", responses: "input" };

function tooLong(endpoint: Endpoint, param: string, contextLength: number, limit: number): InvalidRequestError {
  const what = endpoint === "embeddings" ? "This input" : "This prompt";
  return new InvalidRequestError(
    `${what} has more than ${limit} characters, the most this model takes (${MAX_PROMPT_CHARS_PER_TOKEN} characters per token of its ${contextLength}-token context, checked before the tokens are counted). Shorten it.`,
    { param, code: "context_length_exceeded" },
  );
}

/**
 * Refuses a prompt that cannot fit the model's context, by its length in characters, before anything
 * tokenizes it (an engine tokenizes synchronously: a megabyte prompt would stall the process that runs
 * it). Chat and completions count all the text of the request (messages, tools, response format);
 * embeddings count each input on its own (each is embedded separately). The engine still refuses a
 * prompt under this bound whose tokens do not fit. Stop sequences are not counted: they take no room in
 * the context, and their own bound (4 of at most MAX_STOP_SEQUENCE_CHARS characters, samplingSchemas.ts)
 * keeps them small.
 */
export function assertPromptFits(endpoint: Endpoint, work: CompletionWork, contextLength: number): void {
  const limit = maxPromptChars(contextLength);
  if (work.kind === "embeddings") {
    work.input.forEach((text, i) => {
      if (text.length > limit) throw tooLong(endpoint, work.input.length === 1 ? "input" : `input[${i}]`, contextLength, limit);
    });
    return;
  }
  const { messages, tools, responseFormat } = work.request;
  if (textLengthUpTo([messages, tools, responseFormat], limit) > limit) throw tooLong(endpoint, PROMPT_PARAM[endpoint], contextLength, limit);
}
