import type { GbnfJsonSchema } from "node-llama-cpp";
import { EngineError } from "../engine.ts";
import type { JsonSchema } from "../engine.ts";

const droppedKeys = new Set(["$schema", "$id", "title", "default", "examples", "strict", "readOnly", "writeOnly", "deprecated"]);

/**
 * Adapts a JSON Schema to the subset node-llama-cpp turns into a grammar: `anyOf` becomes `oneOf`, annotation
 * keywords are dropped, a schema with properties but no type is an object. Anything else passes unchanged.
 */
export function toGbnfSchema(schema: JsonSchema, param: string): GbnfJsonSchema {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    throw new EngineError("invalid_request", "A JSON schema must be an object", param);
  }
  return convert(schema, 0, param) as GbnfJsonSchema;
}

function convert(value: unknown, depth: number, param: string): unknown {
  if (depth > 64) throw new EngineError("invalid_request", "The JSON schema is nested too deeply", param);
  if (Array.isArray(value)) return value.map((item) => convert(item, depth + 1, param));
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (droppedKeys.has(key)) continue;
    if (key === "enum" || key === "const") out[key] = item;
    else if (key === "properties" || key === "$defs" || key === "definitions") out[key === "definitions" ? "$defs" : key] = convertMap(item, depth, param);
    else out[key === "anyOf" ? "oneOf" : key] = convert(item, depth + 1, param);
  }
  if (out.type === undefined && out.properties !== undefined) out.type = "object";
  if (typeof out.$ref === "string") out.$ref = out.$ref.replace(/^#\/definitions\//, "#/$defs/");
  return out;
}

function convertMap(value: unknown, depth: number, param: string): unknown {
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, convert(item, depth + 1, param)]));
}
