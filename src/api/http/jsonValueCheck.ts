import { DEFAULT_JSON_SHAPE_LIMITS, type JsonShapeLimits } from "./jsonShapeBudget.ts";
import { isStorableText, STORABLE_TEXT_MESSAGE, toStorableText } from "./storableText.ts";

/** What is wrong with a parsed JSON value, and where (`messages[0].content`; "" for the value itself). */
export type JsonValueProblem = { path: string; message: string };

type Visit = { value: unknown; key: string | number | null; parent: Visit | null; depth: number };

/** Segments of a path named in full; a deeper place is named by its first ones and "...". */
const MAX_PATH_SEGMENTS = 12;

function pathOf(visit: Visit): string {
  const keys: (string | number)[] = [];
  for (let at: Visit | null = visit; at && at.key !== null; at = at.parent) keys.push(at.key);
  keys.reverse();
  let path = "";
  for (const key of keys.slice(0, MAX_PATH_SEGMENTS)) path += typeof key === "number" ? `[${key}]` : path === "" ? key : `.${key}`;
  return keys.length > MAX_PATH_SEGMENTS ? `${path}...` : path;
}

/**
 * Checks a parsed JSON value that is to be stored in PostgreSQL (jsonb) and then validated: within the
 * limits a request body is held to (nesting, members of an object, values), and every string and key
 * storable (no U+0000, no unpaired surrogate: jsonb refuses both). Without it, such a value passes
 * JSON.parse and zod and fails in the database. Iterative: a value nested deeper than the stack allows
 * is only a problem, never a crash. Stops at the first problem.
 */
export function checkJsonValue(value: unknown, limits: JsonShapeLimits = DEFAULT_JSON_SHAPE_LIMITS): JsonValueProblem | null {
  const stack: Visit[] = [{ value, key: null, parent: null, depth: 0 }];
  let values = 0;
  for (let visit = stack.pop(); visit; visit = stack.pop()) {
    const current = visit.value;
    if (++values > limits.maxValues) return { path: pathOf(visit), message: `holds more than ${limits.maxValues} JSON values` };
    if (typeof current === "string") {
      if (!isStorableText(current)) return { path: pathOf(visit), message: STORABLE_TEXT_MESSAGE };
      continue;
    }
    if (current === null || typeof current !== "object") continue;
    const depth = visit.depth + 1;
    if (depth > limits.maxDepth) return { path: pathOf(visit), message: `is nested more than ${limits.maxDepth} levels deep` };
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push({ value: current[i], key: i, parent: visit, depth });
      continue;
    }
    const keys = Object.keys(current);
    if (keys.length > limits.maxMembers) return { path: pathOf(visit), message: `has more than ${limits.maxMembers} members` };
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      if (!isStorableText(key)) return { path: pathOf(visit), message: "has a key with a NUL character (U+0000) or an unpaired UTF-16 surrogate" };
      // An own `__proto__` member (JSON.parse makes one) is dropped by every later copy: refused.
      if (key === "__proto__") return { path: pathOf(visit), message: "has a key named '__proto__', which is not accepted" };
      stack.push({ value: (current as Record<string, unknown>)[key], key, parent: visit, depth });
    }
  }
  return null;
}

function sanitized(value: unknown): unknown {
  if (typeof value === "string") return toStorableText(value);
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(sanitized);
  const copy: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) copy[toStorableText(key)] = sanitized(member);
  return copy;
}

/** JSON.stringify's escapes of what jsonb refuses: \u0000 and a lone surrogate (a pair is written as is). */
const UNSTORABLE_ESCAPE = /\\u0000|\\ud[89a-f]/i;

/**
 * JSON text of a value the platform produced (a model's output, a reply body) for a jsonb column: as
 * JSON.stringify, except that U+0000 and unpaired surrogates, which jsonb refuses, become U+FFFD. A model
 * may generate either; the stored copy then differs from what was streamed in those characters only,
 * where refusing it would lose the whole record. Values without them (almost all) are stringified once.
 */
export function storableJson(value: unknown): string {
  const text = JSON.stringify(value);
  // The test may also match an escaped backslash followed by "u0000": the copy then changes nothing.
  return UNSTORABLE_ESCAPE.test(text) ? JSON.stringify(sanitized(value)) : text;
}
