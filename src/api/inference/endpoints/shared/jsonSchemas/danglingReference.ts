type Json = unknown;

/** Keywords whose values are data, not schemas: a `$ref` inside them is not a reference. */
const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples"]);

/**
 * The first `$ref` of a (meta-valid, depth-bounded) schema that does not point inside it, described, or
 * null. References are resolved within the document only, as OpenAI's structured outputs do: `#` (the
 * root), `#/...` (a JSON pointer, percent- and ~-decoded) and `#name` (a `$anchor`). A reference to
 * another document (a URL, a relative path) cannot be fetched and is refused.
 */
export function danglingReference(root: Json): string | null {
  const refs: string[] = [];
  const anchors = new Set<string>();
  const stack: Json[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    for (const [key, value] of Object.entries(node)) {
      if (DATA_KEYWORDS.has(key)) continue;
      if (key === "$ref" && typeof value === "string") refs.push(value);
      else if ((key === "$anchor" || key === "$dynamicAnchor") && typeof value === "string") anchors.add(value);
      else stack.push(value);
    }
  }
  for (const ref of refs) {
    if (!ref.startsWith("#")) return `the $ref "${ref}" points outside the schema (only "#", "#/..." and "#anchor" references are resolved)`;
    const fragment = ref.slice(1);
    const found = fragment === "" || (fragment.startsWith("/") ? resolvePointer(root, fragment) !== undefined : anchors.has(fragment));
    if (!found) return `the $ref "${ref}" points to nothing in the schema`;
  }
  return null;
}

function resolvePointer(root: Json, pointer: string): Json | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(pointer);
  } catch {
    return undefined;
  }
  let node: Json = root;
  for (const raw of decoded.slice(1).split("/")) {
    const part = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (typeof node !== "object" || node === null || !Object.hasOwn(node, part)) return undefined;
    node = (node as Record<string, Json>)[part];
  }
  return node;
}
