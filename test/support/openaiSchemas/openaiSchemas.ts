import { readdirSync, readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";

/**
 * JSON Schemas of the response bodies of OpenAI's API reference (fields, types, nullability as in
 * openai/openai-openapi and the openai SDK's types generated from it), for chat.completion,
 * chat.completion.chunk, text_completion (+ stream events), model, model list, embedding list and the
 * error body. Extra fields are allowed (e.g. reasoning_content, model metadata); a known field with the
 * wrong type or nullability, or a missing required one, is not.
 */
export type OpenAiShape =
  | "chat.completion"
  | "chat.completion.chunk"
  | "text_completion"
  | "text_completion.chunk"
  | "model"
  | "model.list"
  | "embedding.list"
  | "error"
  | "error.bare"
  | "batch";

const BASE = "https://inference-platform.test/openai/";
const dir = new URL(".", import.meta.url);

function buildValidator() {
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".schema.json"))) {
    ajv.addSchema(JSON.parse(readFileSync(new URL(file, dir), "utf8")) as object);
  }
  return ajv;
}

const ajv = buildValidator();

/** The schema's complaints about `body` (empty when it conforms). */
export function openAiShapeErrors(shape: OpenAiShape, body: unknown): string[] {
  const validate = ajv.getSchema(`${BASE}${shape}.schema.json`);
  if (!validate) throw new Error(`no schema for ${shape}`);
  if (validate(body)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message ?? ""} ${JSON.stringify(e.params)}`);
}

/** Throws, naming every violation, when `body` does not conform to the shape. */
export function assertOpenAiShape(shape: OpenAiShape, body: unknown): void {
  const errors = openAiShapeErrors(shape, body);
  if (errors.length) throw new Error(`response does not conform to ${shape}:\n  ${errors.join("\n  ")}\nbody: ${JSON.stringify(body).slice(0, 2000)}`);
}

/** An error response: the full OpenAI shape, or the spec's bare 402 subscription_required body. */
export function assertOpenAiError(status: number, body: unknown): void {
  assertOpenAiShape(status === 402 ? "error.bare" : "error", body);
}
