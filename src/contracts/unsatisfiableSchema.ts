type Schema = Record<string, unknown>;

const JSON_TYPES = new Set(["null", "boolean", "object", "array", "number", "integer", "string"]);

/**
 * Why no JSON value can match a (meta-valid, depth-bounded) schema, or null when this cannot be told
 * from the schema's structure. Not a full satisfiability check (that is undecidable in general for
 * JSON Schema with `not` and `$ref`): it finds the cases clients actually send by mistake — `false`,
 * an empty `enum`, `not` of an always-true schema, an `allOf` member or every `anyOf`/`oneOf` branch
 * that matches nothing, a required property or required array items whose schema matches nothing, a
 * `type` naming no JSON type. `$ref` targets are not followed (a recursive schema cannot make this loop).
 * The API refuses such schemas (400) and the embedded engine checks them again before it builds a
 * grammar (its grammar builder accepts them and the output could never validate).
 */
export function unsatisfiableReason(schema: unknown, at = "the schema"): string | null {
  if (schema === false) return `${at} is false`;
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return null;
  const s = schema as Schema;
  if (Array.isArray(s.enum) && s.enum.length === 0) return `${at} has an empty enum`;
  const types = typeof s.type === "string" ? [s.type] : Array.isArray(s.type) ? s.type : null;
  if (types !== null && !types.some((type) => JSON_TYPES.has(type as string))) return `${at} has a type that is no JSON type`;
  if ("not" in s && (s.not === true || isEmptyObject(s.not))) return `${at} has "not" of a schema that matches everything`;
  if (Array.isArray(s.allOf)) {
    for (const [index, member] of s.allOf.entries()) {
      const reason = unsatisfiableReason(member, `${at}.allOf[${index}]`);
      if (reason !== null) return reason;
    }
  }
  for (const key of ["anyOf", "oneOf"] as const) {
    const branches = s[key];
    if (Array.isArray(branches) && branches.length > 0 && branches.every((branch, index) => unsatisfiableReason(branch, `${at}.${key}[${index}]`) !== null)) {
      return `no branch of ${at}.${key} matches anything`;
    }
  }
  const properties = isObject(s.properties) ? s.properties : {};
  for (const name of Array.isArray(s.required) ? s.required : []) {
    if (typeof name !== "string" || !(name in properties)) continue;
    const reason = unsatisfiableReason(properties[name], `${at}.properties.${name}`);
    if (reason !== null) return `${reason} (and the property is required)`;
  }
  if (typeof s.minItems === "number" && s.minItems > 0 && s.items !== undefined) {
    const reason = unsatisfiableReason(s.items, `${at}.items`);
    if (reason !== null) return `${reason} (and minItems requires items)`;
  }
  return null;
}

function isObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isEmptyObject(value: unknown): boolean {
  return isObject(value) && Object.keys(value).length === 0;
}
