import { z } from "zod";
import { InvalidRequestError } from "../../../http/errors.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import { exceedsNestingDepth } from "./jsonSchemas/jsonNestingDepth.ts";
import { parseWith } from "../../../http/validate.ts";

/** How deep the JSON value of a backend-specific parameter (e.g. chat_template_kwargs) may nest. */
const MAX_PARAMETER_DEPTH = 16;

/** The values of the well-known backend parameters (vLLM / SGLang / llama.cpp server ranges). */
const KNOWN_VALUES: Record<string, z.ZodType> = {
  top_k: z.number().int().min(-1),
  min_p: z.number().min(0).max(1),
  repetition_penalty: z.number().gt(0).max(10),
};

/**
 * The request fields beyond OpenAI's (every key of `body` not in `known`): each must be one of the
 * backend-specific parameters the model's registry entry allows (`extra_parameters`), else it is a 400
 * naming it, as an unknown field always was (a typo with a value is never dropped silently). Allowed ones
 * are passed through to the backend untouched; well-known ones are range-checked here, and every value is
 * bounded in depth. Null means not set, for any field: a client that sends every parameter it knows,
 * unset ones as null (`functions: null`, `audio: null`), asks for nothing. `notServed`: OpenAI's own fields
 * of the endpoint that are not served, each with what to use instead (or ""): a 400 `unsupported_parameter`.
 */
export function backendParameters(
  body: Record<string, unknown>,
  known: ReadonlySet<string>,
  model: RegisteredModel,
  notServed: Readonly<Record<string, string>> = {},
): Record<string, unknown> | undefined {
  // Built only for a request that has such a field (most have none: nothing allocated for them).
  let extra: Record<string, unknown> | undefined;
  for (const name in body) {
    if (known.has(name)) continue;
    const value = body[name];
    if (value === null) continue;
    const allowed = model.extra_parameters ?? [];
    if (!allowed.includes(name) && Object.hasOwn(notServed, name)) {
      // OpenAI's own field, not served here: said so (and what to use instead), not called unknown.
      throw new InvalidRequestError(`Unsupported parameter: '${name}' is not supported here.${notServed[name] ? ` ${notServed[name]}` : ""}`, {
        param: name,
        code: "unsupported_parameter",
      });
    }
    if (!allowed.includes(name)) {
      const hint = allowed.length > 0 ? ` The model '${model.id}' takes these backend parameters: ${[...new Set(allowed)].join(", ")}.` : "";
      throw new InvalidRequestError(`Unrecognized request argument supplied: ${name}.${hint}`, { param: name, code: "unknown_parameter" });
    }
    if (exceedsNestingDepth(value, MAX_PARAMETER_DEPTH)) {
      throw new InvalidRequestError(`Invalid '${name}': nested too deeply (more than ${MAX_PARAMETER_DEPTH} levels).`, { param: name, code: "invalid_value" });
    }
    const schema = KNOWN_VALUES[name];
    extra ??= {};
    extra[name] = schema ? parseWith(z.object({ [name]: schema }), { [name]: value })[name] : value;
  }
  return extra;
}
