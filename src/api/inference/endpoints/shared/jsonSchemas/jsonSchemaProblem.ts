import { Ajv2020 } from "ajv/dist/2020.js";
import { exceedsNestingDepth } from "./jsonNestingDepth.ts";
import { danglingReference } from "./danglingReference.ts";
import { unsatisfiableReason } from "../../../../../contracts/unsatisfiableSchema.ts";

/**
 * How deep a request's JSON Schema may nest (JSON levels: every object and array counts). OpenAI's
 * structured outputs allow 10 levels of object nesting; 64 JSON levels leave room for that with
 * `properties` / `items` / `anyOf` wrappers, and keep every later walk over the schema (validation,
 * grammar building, the admission's size bound) far from any stack limit.
 */
export const MAX_SCHEMA_DEPTH = 64;

/** Longest validator message passed on to the client. */
const MAX_MESSAGE_LENGTH = 500;

/**
 * What is wrong with a JSON Schema a client sent (tool parameters, a json_schema response format), or
 * null when it can be used:
 * - nested deeper than MAX_SCHEMA_DEPTH;
 * - not a valid JSON Schema: checked by ajv against the draft 2020-12 meta-schema (`type: "nonsense"`,
 *   `required: "a"`, `minLength: -1`, ...), and every `$ref`
 *   must resolve inside the schema. A top-level `$schema` naming another draft (draft-07, as many client
 *   libraries write) is read as 2020-12, the dialect the engines work with. Unknown keywords are allowed,
 *   as the standard says; `format` is an annotation here;
 * - a schema no output can satisfy (`false`, `{"enum": []}`, `{"not": {}}`, a required property with
 *   such a schema, ...): no engine could produce a valid answer, so it is refused before any work.
 */
export function jsonSchemaProblem(schema: unknown, ajv: JsonSchemaValidator): string | null {
  if (exceedsNestingDepth(schema, MAX_SCHEMA_DEPTH)) return `the schema is nested too deeply (more than ${MAX_SCHEMA_DEPTH} levels).`;
  const invalid = ajv.problem(schema);
  if (invalid !== null) return `not a valid JSON Schema: ${invalid.slice(0, MAX_MESSAGE_LENGTH)}`;
  const unsatisfiable = unsatisfiableReason(schema);
  if (unsatisfiable !== null) return `no output can satisfy this schema: ${unsatisfiable}.`;
  return null;
}

/**
 * One ajv instance (draft 2020-12; building one takes tens of milliseconds) that checks client schemas
 * against the meta-schema. Schemas are never compiled: ajv compiles to code at about a millisecond per
 * subschema (seconds for a schema of a few thousand branches, on the API's event loop) and recurses on
 * wide schemas; checking one against the (compiled once) meta-schema is linear and fast. `$ref`s are
 * resolved by danglingReference. Nothing of a request's schema stays in the instance.
 */
export class JsonSchemaValidator {
  readonly #ajv = new Ajv2020({ strict: false, validateFormats: false, logger: false, allErrors: false });

  constructor() {
    this.#ajv.validateSchema({}); // compiles the meta-schema now, not in the first request
  }

  /** What ajv finds wrong with the schema (meta-schema, references), or null. */
  problem(schema: unknown): string | null {
    const candidate = withoutDialect(schema);
    if (typeof candidate !== "object" && typeof candidate !== "boolean") return "a schema must be an object or a boolean";
    try {
      if (this.#ajv.validateSchema(candidate as object) !== true) return this.#ajv.errorsText(this.#ajv.errors, { dataVar: "schema" });
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
    return danglingReference(candidate);
  }
}
function withoutDialect(schema: unknown): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema) || !("$schema" in schema)) return schema;
  const { $schema: _dialect, ...rest } = schema as Record<string, unknown>;
  return rest;
}
