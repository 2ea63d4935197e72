import { Ajv2020 } from "ajv/dist/2020.js";
import { exceedsNestingDepth } from "./jsonNestingDepth.ts";
import { unsatisfiableReason } from "../../../contracts/unsatisfiableSchema.ts";

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
 *   `required: "a"`, `minLength: -1`, a bad `pattern`, ...) and compiled, which resolves every `$ref`
 *   (a dangling one fails). A top-level `$schema` naming another draft (draft-07, as many client
 *   libraries write) is read as 2020-12, the dialect the engines work with. Unknown keywords are allowed,
 *   as the standard says; `format` is an annotation here;
 * - a schema no output can satisfy (`false`, `{"enum": []}`, `{"not": {}}`, a required property with
 *   such a schema, ...): no engine could produce a valid answer, so it is refused before any work.
 */
export function jsonSchemaProblem(schema: unknown, ajv: JsonSchemaCompiler): string | null {
  if (exceedsNestingDepth(schema, MAX_SCHEMA_DEPTH)) return `the schema is nested too deeply (more than ${MAX_SCHEMA_DEPTH} levels).`;
  const invalid = ajv.problem(schema);
  if (invalid !== null) return `not a valid JSON Schema: ${invalid.slice(0, MAX_MESSAGE_LENGTH)}`;
  const unsatisfiable = unsatisfiableReason(schema);
  if (unsatisfiable !== null) return `no output can satisfy this schema: ${unsatisfiable}.`;
  return null;
}

/**
 * One ajv instance (draft 2020-12; building one takes tens of milliseconds) that validates and compiles
 * client schemas without keeping them: after each compile (synchronous, so requests never interleave)
 * the schema is removed from ajv's cache and every reference it registered (its `$id`s, its root) is
 * deleted again, so unique schemas do not pile up and no request can resolve another's schema.
 */
export class JsonSchemaCompiler {
  readonly #ajv = new Ajv2020({ strict: false, validateFormats: false, logger: false, allErrors: false });

  /** The validator's complaint about the schema, or null if it compiles. */
  problem(schema: unknown): string | null {
    const candidate = withoutDialect(schema);
    if (typeof candidate !== "object" && typeof candidate !== "boolean") return "a schema must be an object or a boolean";
    const refs = this.#ajv.refs;
    const known = new Set(Object.keys(refs));
    try {
      this.#ajv.compile(candidate as object);
      return null;
    } catch (error) {
      return (error instanceof Error ? error.message : String(error)).replace(/^schema is invalid: /, "");
    } finally {
      if (typeof candidate === "object" && candidate !== null) this.#ajv.removeSchema(candidate);
      for (const ref of Object.keys(refs)) if (!known.has(ref)) delete refs[ref];
    }
  }
}

function withoutDialect(schema: unknown): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema) || !("$schema" in schema)) return schema;
  const { $schema: _dialect, ...rest } = schema as Record<string, unknown>;
  return rest;
}
