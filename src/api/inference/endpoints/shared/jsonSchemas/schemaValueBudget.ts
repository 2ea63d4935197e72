import type { z } from "zod";
import { exceedsJsonValues } from "./jsonValueCount.ts";

/**
 * The JSON values (objects, arrays, scalars) all the JSON Schemas of one request (tools' parameters,
 * the response format) may hold together: several times OpenAI's 5000 properties per schema, and a
 * bound on what checking them costs the API's event loop (tens of milliseconds at most).
 */
export const MAX_REQUEST_SCHEMA_VALUES = 50_000;

/**
 * Adds an issue at `path` (a 400) when the request's JSON Schemas (absent ones skipped) hold more than
 * MAX_REQUEST_SCHEMA_VALUES values together. For chat completions' and the Responses API's request schemas.
 */
export function checkSchemaValueBudget(schemas: readonly unknown[], path: string, ctx: z.RefinementCtx): void {
  if (
    !exceedsJsonValues(
      schemas.filter((schema) => schema !== undefined && schema !== null),
      MAX_REQUEST_SCHEMA_VALUES,
    )
  ) {
    return;
  }
  ctx.addIssue({ code: "custom", path: [path], message: `the JSON Schemas of a request may hold at most ${MAX_REQUEST_SCHEMA_VALUES} values in all.` });
}
