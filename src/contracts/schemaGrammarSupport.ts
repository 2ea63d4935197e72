type Schema = Record<string, unknown>;

/**
 * What the embedded engine's grammar can enforce of a JSON Schema (workers/engines/embedded/toGbnfSchema.ts
 * builds it): the one list the API checks strict schemas against and the engine builds grammars from.
 */

/** String formats the grammar generates (a conservative form of each: docs/compatibility.md). */
export const GRAMMAR_FORMATS: ReadonlySet<string> = new Set(["date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"]);

/** Formats node-llama-cpp's own JSON-schema grammar builds (a tool call's arguments with tool_choice "auto"). */
export const NATIVE_FORMATS: ReadonlySet<string> = new Set(["date-time", "date", "time"]);

/** Integers the grammar writes have at most 15 digits: a bound beyond is cut to this. */
export const GRAMMAR_INTEGER_LIMIT = 999_999_999_999_999;

/** Keywords that only annotate: nothing to enforce. */
const ANNOTATIONS = new Set([
  "$schema",
  "$id",
  "$comment",
  "$anchor",
  "title",
  "description",
  "default",
  "examples",
  "readOnly",
  "writeOnly",
  "deprecated",
  "strict",
]);

/** Keywords the grammar enforces in every mode (node-llama-cpp's JSON-schema grammar). */
const ENFORCED = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "enum",
  "const",
  "anyOf",
  "$ref",
  "$defs",
  "definitions",
  "minLength",
  "maxLength",
]);

const NUMERIC_BOUNDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] as const;

/**
 * The integers [low, high] a number schema's bounds allow (a fraction lies between two of them), cut to
 * ±GRAMMAR_INTEGER_LIMIT; null when the schema has no bound. `empty` when no integer is in range (a
 * `number` between 0.2 and 0.7): the grammar cannot write such a value.
 */
export function integerBounds(schema: Schema): { low: number; high: number; empty: boolean } | null {
  if (!NUMERIC_BOUNDS.some((key) => typeof schema[key] === "number")) return null;
  let low = -GRAMMAR_INTEGER_LIMIT;
  let high = GRAMMAR_INTEGER_LIMIT;
  if (typeof schema.minimum === "number") low = Math.max(low, Math.ceil(schema.minimum));
  if (typeof schema.exclusiveMinimum === "number") low = Math.max(low, Math.floor(schema.exclusiveMinimum) + 1);
  if (typeof schema.maximum === "number") high = Math.min(high, Math.floor(schema.maximum));
  if (typeof schema.exclusiveMaximum === "number") high = Math.min(high, Math.ceil(schema.exclusiveMaximum) - 1);
  return { low, high, empty: low > high };
}

/**
 * The first keyword of a (meta-valid, depth-bounded) schema the embedded engine's grammar does not
 * enforce, described with where it is, or null. With `strict: true` such a schema is refused (400) before
 * anything is charged, so that no output breaks a strict schema. `forced` is false for a tool's
 * parameters that the model may call with tool_choice "auto": node-llama-cpp builds that grammar itself
 * and knows only the date and time formats and no numeric bounds.
 */
export function unenforcedKeyword(schema: unknown, forced: boolean, at = "the schema"): string | null {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return null;
  const s = schema as Schema;
  for (const [key, value] of Object.entries(s)) {
    if (ANNOTATIONS.has(key) || ENFORCED.has(key)) continue;
    if (key === "format") {
      const formats = forced ? GRAMMAR_FORMATS : NATIVE_FORMATS;
      if (typeof value !== "string" || !formats.has(value)) return `"format": ${JSON.stringify(value)} at ${at}`;
      if (s.minLength !== undefined || s.maxLength !== undefined) return `"format" together with minLength/maxLength at ${at}`;
      continue;
    }
    // zod writes a pattern beside each format; the format's grammar is what is generated.
    if (key === "pattern" && typeof s.format === "string" && (forced ? GRAMMAR_FORMATS : NATIVE_FORMATS).has(s.format)) continue;
    if ((NUMERIC_BOUNDS as readonly string[]).includes(key)) {
      if (!forced) return `"${key}" at ${at} (in a tool that tool_choice "auto" may call)`;
      if (integerBounds(s)?.empty) return `"${key}" at ${at}: no integer lies within the bounds`;
      continue;
    }
    return `"${key}" at ${at}`;
  }
  // Bounds that no value meets: the grammar would bound one side only, and the output break the schema.
  for (const [low, high, what] of [
    ["minLength", "maxLength", "string"],
    ["minItems", "maxItems", "array"],
  ] as const) {
    const min = s[low];
    const max = s[high];
    if (typeof min === "number" && typeof max === "number" && min > max) return `"${low}" is above "${high}" at ${at}: no ${what} fits the bounds`;
  }
  const properties = isObject(s.properties) ? s.properties : {};
  for (const name of Array.isArray(s.required) ? s.required : []) {
    if (typeof name === "string" && !(name in properties) && s.additionalProperties !== true)
      return `"required" names "${name}", which is not in properties, at ${at}`;
  }
  for (const [name, sub] of Object.entries(properties)) {
    const found = unenforcedKeyword(sub, forced, `${at}.properties.${name}`);
    if (found !== null) return found;
  }
  for (const key of ["$defs", "definitions"] as const) {
    for (const [name, sub] of Object.entries(isObject(s[key]) ? s[key] : {})) {
      const found = unenforcedKeyword(sub, forced, `${at}.${key}.${name}`);
      if (found !== null) return found;
    }
  }
  for (const key of ["items", "additionalProperties"] as const) {
    const found = unenforcedKeyword(s[key], forced, `${at}.${key}`);
    if (found !== null) return found;
  }
  for (const key of ["prefixItems", "anyOf"] as const) {
    for (const [index, sub] of (Array.isArray(s[key]) ? s[key] : []).entries()) {
      const found = unenforcedKeyword(sub, forced, `${at}.${key}[${index}]`);
      if (found !== null) return found;
    }
  }
  return null;
}

function isObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
