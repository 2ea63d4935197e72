import { readdirSync, readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";

/**
 * JSON Schemas of the response bodies of OpenAI's API reference (fields, types, nullability as in
 * openai/openai-openapi and the openai SDK's types generated from it), for chat.completion,
 * chat.completion.chunk, text_completion (+ stream events), model, model list, embedding list, file, file
 * list, file deletion, the error body, and the Responses API's response object, its stream events, its
 * deletion body and its input items list. Extra fields are allowed (e.g. reasoning_content, model metadata); a known field with the
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
  | "file"
  | "file.list"
  | "file.deleted"
  | "error"
  | "error.bare"
  | "response"
  | "response.stream-event"
  | "response.deleted"
  | "response.input-items.list"
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

/**
 * The complaints about one Responses API stream event: when its `type` is one the schema knows, only that
 * event's definition is reported (the oneOf over every event would list every other event's complaints).
 */
export function responseStreamEventErrors(event: unknown): string[] {
  const errors = openAiShapeErrors("response.stream-event", event);
  if (!errors.length) return errors;
  const type = typeof event === "object" && event !== null ? (event as { type?: unknown }).type : undefined;
  const definition = typeof type === "string" ? STREAM_EVENT_DEFINITIONS[type] : undefined;
  if (!definition) return errors;
  const validate = ajv.getSchema(`${BASE}response.stream-event.schema.json#/$defs/${definition}`);
  if (!validate || validate(event)) return errors;
  return (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message ?? ""} ${JSON.stringify(e.params)}`);
}

/** Throws, naming every violation, when `event` is not a Responses API stream event the schema knows. */
export function assertResponseStreamEvent(event: unknown): void {
  const errors = responseStreamEventErrors(event);
  if (errors.length) throw new Error(`stream event does not conform:\n  ${errors.join("\n  ")}\nevent: ${JSON.stringify(event).slice(0, 2000)}`);
}

/** The stream event types response.stream-event.schema.json defines, by the name of their definition. */
export const STREAM_EVENT_DEFINITIONS: Readonly<Record<string, string>> = streamEventDefinitions();

function streamEventDefinitions(): Record<string, string> {
  const schema = JSON.parse(readFileSync(new URL("response.stream-event.schema.json", dir), "utf8")) as {
    $defs: Record<string, { properties?: { type?: { const?: string } } }>;
  };
  const byType: Record<string, string> = {};
  for (const [name, definition] of Object.entries(schema.$defs)) {
    const type = definition.properties?.type?.const;
    if (type) byType[type] = name;
  }
  return byType;
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
