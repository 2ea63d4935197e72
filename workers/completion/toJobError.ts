import type { Endpoint } from "../../src/contracts/completionJob.ts";
import type { JobError } from "../../src/contracts/deltaMessage.ts";
import { EngineError } from "../engines/engine.ts";

/** The request field that holds the prompt, where an engine (which sees every prompt as a chat) says `messages`. */
const PROMPT_PARAM: Partial<Record<Endpoint, string>> = { completions: "prompt", responses: "input" };

/**
 * What a client is told of an engine failure of the platform's (the worker logs the engine's own words):
 * an upstream server's message may hold what no client should read (its address, an internal page, the
 * credential it was sent, echoed back in a 401).
 */
const CLIENT_MESSAGE: Partial<Record<JobError["kind"], string>> = {
  internal: "The model failed while generating.",
  unavailable: "The model is unavailable right now; retry later.",
};

/**
 * What the client is told of an engine failure: an engine's own refusal as it said it (the prompt named
 * by the endpoint's field), anything else in words of the platform's (CLIENT_MESSAGE).
 */
export function toJobError(error: unknown, endpoint?: Endpoint): JobError {
  if (error instanceof EngineError) {
    const promptParam = endpoint === undefined ? undefined : PROMPT_PARAM[endpoint];
    const aboutPrompt = promptParam !== undefined && error.param === "messages";
    return {
      kind: error.kind,
      message: CLIENT_MESSAGE[error.kind] ?? (aboutPrompt ? namingPrompt(error.message, promptParam) : error.message),
      param: aboutPrompt ? promptParam : endpoint === "responses" ? responsesParam(error.param) : error.param,
      ...(error.code === null ? {} : { code: error.code }),
    };
  }
  return { kind: "internal", message: CLIENT_MESSAGE.internal!, param: null };
}

/** A chat field an engine names, as the Responses API calls it: its `response_format` is `text.format` (a probe read a param it never sent). */
function responsesParam(param: string | null): string | null {
  if (param === null || !param.startsWith("response_format")) return param;
  return param.replace(/^response_format(?:\.json_schema)?/, "text.format");
}

/** An engine's message about "the messages" (its context-length refusals), as the endpoint calls its prompt. */
function namingPrompt(message: string, promptParam: string): string {
  return message
    .replace("your messages resulted", `your ${promptParam} resulted`)
    .replace("in the messages,", `in the ${promptParam},`)
    .replace("of the messages", `of the ${promptParam}`);
}
