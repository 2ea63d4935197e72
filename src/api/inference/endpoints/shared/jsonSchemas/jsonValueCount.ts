/**
 * Whether the JSON values in `roots` (every object, array and scalar, the roots included) number more
 * than `limit`, counted without recursion and stopping as soon as they do: a huge value costs no more
 * than its first `limit + 1` values.
 */
export function exceedsJsonValues(roots: readonly unknown[], limit: number): boolean {
  const stack: unknown[] = [...roots];
  let count = 0;
  while (stack.length > 0) {
    const item = stack.pop();
    if (++count > limit) return true;
    if (typeof item !== "object" || item === null) continue;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push(child);
  }
  return false;
}
