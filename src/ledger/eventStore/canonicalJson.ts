/**
 * RFC 8785 (JSON Canonicalization Scheme) for the values JSON.parse returns: object members sorted by
 * their names' UTF-16 code units, no whitespace, strings and numbers serialised as ECMAScript's
 * JSON.stringify does (which is what RFC 8785 prescribes). Undefined members are left out, as in JSON.
 * Written with plain loops: the verifier runs it for every event of the log.
 */
export function canonicalJson(value: unknown): string {
  switch (typeof value) {
    case "string":
      return quote(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("canonicalJson: a JSON number must be finite");
      return JSON.stringify(value);
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) {
        let out = "[";
        for (let i = 0; i < value.length; i++) {
          if (i) out += ",";
          const item: unknown = value[i];
          out += item === undefined ? "null" : canonicalJson(item);
        }
        return `${out}]`;
      }
      if (value instanceof Date) return JSON.stringify(value.toISOString());
      const record = value as Record<string, unknown>;
      // Default sort compares UTF-16 code units, as RFC 8785 requires.
      const keys = Object.keys(record).sort();
      let out = "{";
      let first = true;
      for (const key of keys) {
        const member = record[key];
        if (member === undefined) continue;
        if (!first) out += ",";
        first = false;
        out += `${quote(key)}:${canonicalJson(member)}`;
      }
      return `${out}}`;
    }
    default:
      throw new TypeError(`canonicalJson: ${typeof value} is not JSON`);
  }
}

/** What JSON.stringify must escape: quote, backslash, control characters and (lone) surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what must be escaped
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A JSON string literal, as JSON.stringify writes it (the common case without escapes skips it). */
function quote(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}
