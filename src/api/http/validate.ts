import type { Context, Next } from "koa";
import type { z } from "zod";
import { InvalidRequestError } from "./errors.ts";
import { type BodyLimits, requestBody } from "./requestBody.ts";
import { stateOf } from "./requestState.ts";

type Source = "body" | "query" | "params";

/** `messages[0].content` style path for a zod issue. */
export function paramPath(path: readonly PropertyKey[]): string {
  return path.map((part, i) => (typeof part === "number" ? `[${part}]` : i === 0 ? String(part) : `.${String(part)}`)).join("");
}

/** Unknown fields named in an error message; the rest are counted ("and 12 more"). */
const NAMED_UNKNOWN_FIELDS = 5;

/** How many nested unions are looked into for the issue that names what is wrong. */
const MAX_UNION_DEPTH = 8;

/**
 * A union with no message of its own whose input had the type of exactly one of its options (an array
 * where a string or an array is taken): that option's own issue, which names what is wrong inside it
 * (`input[0]: expected a message, ...`) rather than the union's "Invalid input" at its top.
 */
function matchedOptionIssue(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  let current = issue;
  for (let depth = 0; depth < MAX_UNION_DEPTH; depth++) {
    if (current.code !== "invalid_union" || current.message !== "Invalid input") return current;
    // An option refused at its top (not its type, not one of its values) is one the input does not match.
    const matched = current.errors.filter((option) => {
      const first = option[0];
      return first !== undefined && !(first.path.length === 0 && (first.code === "invalid_type" || first.code === "invalid_value"));
    });
    if (matched.length !== 1) return current;
    const inner = matched[0]![0]!;
    current = { ...inner, path: [...current.path, ...inner.path] };
  }
  return current;
}

/** Turns the first zod issue into a 400 invalid_request_error naming the parameter. */
export function invalidRequestFromZod(error: z.ZodError): InvalidRequestError {
  const issue = matchedOptionIssue(error.issues[0]!);
  if (issue.code === "unrecognized_keys") {
    const prefix = issue.path.length ? `${paramPath(issue.path)}.` : "";
    const keys = issue.keys.map((k) => `${prefix}${k}`);
    const named = keys.slice(0, NAMED_UNKNOWN_FIELDS).join(", ");
    const more = keys.length > NAMED_UNKNOWN_FIELDS ? ` and ${keys.length - NAMED_UNKNOWN_FIELDS} more` : "";
    return new InvalidRequestError(`Unrecognized request argument supplied: ${named}${more}`, {
      param: keys[0]!,
      code: "unknown_parameter",
    });
  }
  const param = paramPath(issue.path);
  if (isMissing(issue)) {
    return new InvalidRequestError(`Missing required parameter: '${param}'.`, { param: param || null, code: "missing_required_parameter" });
  }
  const where = param ? `Invalid '${param}': ` : "Invalid request body: ";
  return new InvalidRequestError(`${where}${issueMessage(issue)}`, { param: param || null, code: "invalid_value" });
}

/** A required field not sent: of a plain type, or of a union (`prompt`: a string or an array) whose every branch says so. */
function isMissing(issue: z.core.$ZodIssue): boolean {
  const absent = (one: z.core.$ZodIssue | undefined) => one?.code === "invalid_type" && one.input === undefined && /received undefined/.test(one.message);
  if (issue.code === "invalid_union") return issue.errors.length > 0 && issue.errors.every((branch) => absent(branch[0]));
  return absent(issue);
}

/** A union with no message of its own says which types it takes ("expected string or array"), not "Invalid input". */
function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code !== "invalid_union" || issue.message !== "Invalid input" || issue.errors.length === 0) return issue.message;
  const expected = issue.errors.map((branch) => {
    const first = branch[0];
    return first?.code === "invalid_type"
      ? first.expected
      : first?.code === "invalid_value"
        ? first.values.map((value) => JSON.stringify(value)).join(" or ")
        : null;
  });
  if (expected.some((value) => value === null)) return issue.message;
  return `expected ${[...new Set(expected)].join(" or ")}.`;
}

export function parseWith<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw invalidRequestFromZod(result.error);
  return result.data;
}

/**
 * Parses the JSON body / query / params with the schema; the handler reads the result with
 * validated(ctx, schema). The body is read here and only here: mount validate after the route's
 * authentication. `limits` narrow the body's size for a route anyone may call (sign-in, registration).
 */
export function validate<S extends z.ZodType>(schema: S, source: Source = "body", limits?: BodyLimits) {
  return async function validateRequest(ctx: Context, next: Next): Promise<void> {
    const input = source === "body" ? await requestBody(ctx, limits) : source === "query" ? ctx.query : (ctx as { params?: unknown }).params;
    if (source === "body" && (input === undefined || input === null || typeof input !== "object" || Array.isArray(input))) {
      // Not read as JSON for its Content-Type (text/plain, a form, none): that is what to fix, not the body.
      const type = ctx.request.type;
      if (input === undefined && ctx.request.length !== 0 && ["POST", "PUT", "PATCH"].includes(ctx.method)) {
        throw new InvalidRequestError(
          `The request body must be sent with Content-Type: application/json (${type ? `it was sent as '${type.slice(0, 100)}'` : "it had no Content-Type"}).`,
          { code: "invalid_json" },
        );
      }
      throw new InvalidRequestError("The request body must be a JSON object.", { code: "invalid_json" });
    }
    const state = stateOf(ctx);
    state.validated ??= new Map();
    state.validated.set(schema, source === "query" ? parseQuery(schema, ctx.query) : parseWith(schema, input));
    await next();
  };
}

/**
 * Whether the list given as `name` is refused for being a list: with its first value alone, `name` has no
 * issue (`limit=1&limit=2`, `order=asc&order=desc`), unlike a list parameter's bad values (`include=a&include=b`).
 */
function takesOneValue(schema: z.ZodType, named: Record<string, unknown>, name: string, given: string[]): boolean {
  const alone = schema.safeParse({ ...named, [name]: given[0] });
  return alone.success || !alone.error.issues.some((one) => one.path[0] === name);
}

/** A list's query key: `name[]` or `name[<index>]`. */
const LIST_KEY = /^(.+)\[\d*\]$/;

/**
 * The query parsed with the schema. A list may come as `name=a&name=b` or, as the OpenAI SDKs send it,
 * `name[]=a&name[]=b` (it was ignored: `include[]` of an SDK's retrieve did nothing, and went unchecked).
 * A parameter given twice that the schema takes once (`limit=1&limit=2`: an array where it expects one
 * value) is a 400 that says so (it said "expected number, received NaN").
 */
function parseQuery<S extends z.ZodType>(schema: S, query: Record<string, string | string[] | undefined>): z.infer<S> {
  const named: Record<string, string | string[] | undefined> = {};
  for (const [key, value] of Object.entries(query)) {
    // `name[]` and `name[0]` (as some clients index a list) are `name`'s values.
    const name = LIST_KEY.exec(key)?.[1] ?? key;
    const before = named[name];
    named[name] = before === undefined ? (key === name ? value : [value ?? []].flat()) : [before, value ?? []].flat();
  }
  const result = schema.safeParse(named);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const name = issue?.path[0];
  const given = typeof name === "string" && issue?.path.length === 1 ? named[name] : undefined;
  if (typeof name === "string" && Array.isArray(given) && takesOneValue(schema, named, name, given)) {
    // One value expected (a number, one of a set, ...), a list given.
    const how = given.length > 1 ? "was given more than once" : `was given as a list ('${name}[]')`;
    throw new InvalidRequestError(`The query parameter '${name}' ${how}; it takes one value.`, { param: name, code: "invalid_value" });
  }
  throw invalidRequestFromZod(result.error);
}

/**
 * The input validate(schema) parsed for this request, typed by the schema. A route that reads it
 * without mounting validate(schema) first is a programming error (500), never a client's.
 */
export function validated<S extends z.ZodType>(ctx: Context, schema: S): z.infer<S> {
  const inputs = stateOf(ctx).validated;
  if (!inputs?.has(schema)) throw new Error("validated(ctx, schema): the route is mounted without validate(schema)");
  // The one cast: the value was parsed by this very schema (the map's key).
  return inputs.get(schema) as z.infer<S>;
}
