/**
 * RFC 8785 (JSON Canonicalization Scheme) for the values JSON.parse returns: object members sorted by
 * their names' UTF-16 code units, no whitespace, strings and numbers serialised as ECMAScript's
 * JSON.stringify does (which is what RFC 8785 prescribes). Undefined members are left out, as in JSON.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("canonicalJson: a JSON number must be finite");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? "null" : canonicalJson(item))).join(",")}]`;
  if (typeof value === "object") {
    if (value instanceof Date) return JSON.stringify(value.toISOString());
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  throw new TypeError(`canonicalJson: ${typeof value} is not JSON`);
}
