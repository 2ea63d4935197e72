import fc from "fast-check";

/** A path into a JSON body: object keys and array indexes. */
export type BodyPath = readonly (string | number)[];

/** Strings a client (or an attacker) sends that code tends to trip over. */
export const awkwardString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.constantFrom(
    "",
    " ",
    "\u0000",
    "a\u0000b",
    "\ud800",
    "x\udc00y",
    "0000-01-01",
    "9999-99-99",
    "-1",
    "1e309",
    "NaN",
    "null",
    "true",
    "[]",
    "{}",
    "../../etc/passwd",
    "%00",
    "<script>",
    "sk-",
    "x".repeat(300),
    "\u202e\ufeff",
  ),
);

/** Nested arrays/objects up to `maxDepth` (kept well below what JSON.stringify recursion can take). */
const nested = fc.integer({ min: 1, max: 60 }).map((depth) => {
  let value: unknown = "leaf";
  for (let i = 0; i < depth; i += 1) value = i % 2 ? [value] : { a: value };
  return value;
});

/** Any JSON value a mutated field may get. */
export const awkwardValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: awkwardString },
  { weight: 2, arbitrary: fc.oneof(fc.integer(), fc.constantFrom(0, -1, 1, 2 ** 31, 2 ** 53, -(2 ** 53), 1.5, 1e308, -0)) },
  { weight: 1, arbitrary: fc.double() },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constantFrom([], {}, [null], [""], [{}], { type: "nonsense" }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: nested },
);

export type Mutation =
  | { op: "set"; path: BodyPath; value: unknown }
  | { op: "delete"; path: BodyPath }
  | { op: "add"; key: string; value: unknown }
  | { op: "replace"; value: unknown };

/** One to three mutations of a body whose interesting fields are `paths`. */
export function mutations(paths: readonly BodyPath[]): fc.Arbitrary<Mutation[]> {
  const path = fc.constantFrom(...paths);
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    { weight: 6, arbitrary: fc.record({ op: fc.constant("set" as const), path, value: awkwardValue }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("delete" as const), path }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("add" as const), key: fc.string({ minLength: 1, maxLength: 12 }), value: awkwardValue }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("replace" as const), value: awkwardValue }) },
  );
  return fc.array(mutation, { minLength: 1, maxLength: 3 });
}

/** The base body with the mutations applied (a deep copy; paths through non-containers are skipped). */
export function applyMutations(base: unknown, list: readonly Mutation[]): unknown {
  let body: unknown = structuredClone(base);
  for (const m of list) {
    if (m.op === "replace") {
      body = structuredClone(m.value);
      continue;
    }
    if (body === null || typeof body !== "object") continue;
    if (m.op === "add") {
      if (!Array.isArray(body)) (body as Record<string, unknown>)[m.key] = structuredClone(m.value);
      continue;
    }
    let parent = body as Record<string | number, unknown>;
    for (const step of m.path.slice(0, -1)) {
      const next = parent[step];
      if (next === null || typeof next !== "object") {
        parent = undefined as never;
        break;
      }
      parent = next as Record<string | number, unknown>;
    }
    if (!parent) continue;
    const last = m.path.at(-1)!;
    if (m.op === "delete") delete parent[last];
    else parent[last] = structuredClone(m.value);
  }
  return body;
}

/** A body sent as raw text: broken JSON, JSON of the wrong type, or nothing. */
export const rawBody: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.constantFrom("", "{", "}", "{}", "[]", "null", "0", '"x"', '{"model":', '{"a":1,}', "\u0000", '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}'),
);
