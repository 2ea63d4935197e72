import { z } from "zod";

/** Items checked together: a bad one costs at most the issues of this many. */
const ITEMS_PER_CHECK = 256;

/**
 * An array whose items are checked a few hundred at a time, in order, stopping at the first group with
 * a bad item: only that group's issues are reported (the request's error names the first bad item
 * anyway). `z.array(item)` checks every item and builds issues for each bad one, which for tens of
 * thousands of bad items in one request (a body within the size limits) held the event loop for a
 * second and more. A valid array costs about what `z.array(item)` costs. `array` carries the array's own
 * checks (its length), made before any item is looked at.
 */
export function itemsInOrder<T extends z.ZodType>(item: T, array: z.ZodArray<z.ZodUnknown> = z.array(z.unknown())) {
  const group = z.array(item);
  return array.transform((items, ctx): z.output<T>[] => {
    if (items.length <= ITEMS_PER_CHECK) return checked(group.safeParse(items), 0, ctx) ?? z.NEVER;
    const parsed: z.output<T>[] = [];
    for (let start = 0; start < items.length; start += ITEMS_PER_CHECK) {
      const some = checked(group.safeParse(items.slice(start, start + ITEMS_PER_CHECK)), start, ctx);
      if (!some) return z.NEVER;
      for (const value of some) parsed.push(value);
    }
    return parsed;
  });
}

/** A group's items, or (some bad) its issues added to `ctx` at their places in the whole array and null. */
function checked<O>(result: z.ZodSafeParseResult<O[]>, offset: number, ctx: z.core.$RefinementCtx): O[] | null {
  if (result.success) return result.data;
  for (const issue of result.error.issues) {
    const [index, ...rest] = issue.path;
    ctx.issues.push({ ...issue, path: typeof index === "number" ? [index + offset, ...rest] : issue.path } as z.core.$ZodRawIssue);
  }
  return null;
}
