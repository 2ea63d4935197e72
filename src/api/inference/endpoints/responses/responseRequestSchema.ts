import { z } from "zod";
import { INCLUDABLE } from "./responseSchemas.ts";
import { checkSchemaValueBudget } from "../shared/jsonSchemas/schemaValueBudget.ts";
import { schemaShape } from "../shared/requestParameters.ts";
import { RESPONSE_PARAMETERS } from "./responseParameters.ts";

/**
 * POST /v1/responses (OpenAI's Responses API): one field per parameter of RESPONSE_PARAMETERS, and the
 * rules between them. Fields beyond these are backend-specific parameters, as for chat completions
 * (allowed per model by its registry entry; an unknown one is a 400).
 */
export const ResponseRequestSchema = z
  .object(schemaShape(RESPONSE_PARAMETERS))
  .catchall(z.unknown())
  .superRefine((body, ctx) => {
    if (body.store === false && body.background === true) {
      ctx.addIssue({
        code: "custom",
        path: ["background"],
        message: "background responses must be stored: store: false cannot be used with background: true.",
      });
    }
    // An item's id names it in the stored input's pages (`after`, `before`) and in later item references:
    // two items of one id would make both ambiguous (a page after it would be the same page again).
    if (Array.isArray(body.input)) {
      const seen = new Set<string>();
      for (const [index, item] of body.input.entries()) {
        if (item.id === undefined) continue;
        if (seen.has(item.id))
          ctx.addIssue({ code: "custom", path: ["input", index, "id"], message: `the item id '${item.id}' is used by an earlier item of input.` });
        seen.add(item.id);
      }
    }
    const toolNames = new Set<string>();
    (body.tools ?? []).forEach((tool, index) => {
      if (toolNames.has(tool.name)) {
        ctx.addIssue({ code: "custom", path: ["tools", index, "name"], message: `another tool is already named '${tool.name}'; tool names must be unique.` });
      }
      toolNames.add(tool.name);
    });
    if (body.tool_choice && body.tool_choice !== "none" && body.tool_choice !== "auto" && toolNames.size === 0) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: "tool_choice is only allowed when tools are specified." });
    }
    if (typeof body.tool_choice === "object" && body.tool_choice && !toolNames.has(body.tool_choice.name)) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: `tool_choice names '${body.tool_choice.name}', which is not in tools.` });
    }
    const format = body.text?.format;
    const schemas = [...(body.tools ?? []).map((tool) => tool.parameters), format?.type === "json_schema" ? format.schema : undefined];
    checkSchemaValueBudget(schemas, body.tools?.length ? "tools" : "text", ctx);
  });

export type ResponseRequest = z.infer<typeof ResponseRequestSchema>;

/** The OpenAI fields of a Responses request; any other field is a backend-specific parameter. */
export const RESPONSE_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(RESPONSE_PARAMETERS));

/** `include` of a query (`include=a&include=b` or one value): the values a create takes, checked the same. */
const IncludeQuerySchema = z.union([z.enum(INCLUDABLE), z.array(z.enum(INCLUDABLE)).max(16)]).optional();

/** The query of GET /v1/responses/{id}. */
export const RetrieveResponseQuerySchema = z.object({
  stream: z
    .enum(["true", "false"])
    .transform((value) => value === "true")
    .optional(),
  starting_after: z.coerce.number().int().min(-1).optional(),
  include: IncludeQuerySchema,
  include_obfuscation: z.string().optional(),
});
export type RetrieveResponseQuery = z.infer<typeof RetrieveResponseQuerySchema>;

/** The query of GET /v1/responses/{id}/input_items. */
export const InputItemsQuerySchema = z.object({
  after: z.string().max(200).optional(),
  before: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(100).optional(),
  order: z.enum(["asc", "desc"]).optional(),
  include: IncludeQuerySchema,
});
export type InputItemsQuery = z.infer<typeof InputItemsQuerySchema>;
