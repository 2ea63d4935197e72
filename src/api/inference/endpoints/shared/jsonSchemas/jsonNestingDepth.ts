/**
 * The nesting depth of a parsed JSON value (a scalar is 0, `{}` and `[]` are 1), measured without
 * recursion and stopping as soon as it passes `limit`: a value nested thousands of levels deep costs no
 * stack and no more work than its first `limit + 1` levels.
 */
export function exceedsNestingDepth(value: unknown, limit: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: item, depth } = stack.pop()!;
    if (typeof item !== "object" || item === null) continue;
    if (depth + 1 > limit) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (typeof child === "object" && child !== null) stack.push({ value: child, depth: depth + 1 });
    }
  }
  return false;
}
