import { z } from "zod";
import { checkSchemaValueBudget } from "../shared/jsonSchemas/schemaValueBudget.ts";
import { schemaShape } from "../shared/requestParameters.ts";
import { CHAT_PARAMETERS } from "./chatParameters.ts";
import { ChatMessageSchema } from "./chatSchemas.ts";

export { ChatMessageSchema };

/**
 * POST /v1/chat/completions (spec 4.1): one field per parameter of CHAT_PARAMETERS, and the rules
 * between them. Fields beyond these are backend-specific parameters, allowed per model by its registry
 * entry (backendParameters: an unknown one is a 400, never dropped).
 */
export const ChatCompletionRequestSchema = z
  .object(schemaShape(CHAT_PARAMETERS))
  .catchall(z.unknown())
  .superRefine((body, ctx) => {
    if (body.top_logprobs !== null && body.top_logprobs !== undefined && body.logprobs !== true) {
      ctx.addIssue({ code: "custom", path: ["top_logprobs"], message: "top_logprobs requires logprobs to be true." });
    }
    if (body.stream_options && body.stream !== true) {
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "stream_options is only allowed when stream is true." });
    }
    const toolNames = new Set<string>();
    (body.tools ?? []).forEach((tool, index) => {
      // Two tools of one name: which one a call (or tool_choice) means would be a guess.
      if (toolNames.has(tool.function.name)) {
        ctx.addIssue({
          code: "custom",
          path: ["tools", index, "function", "name"],
          message: `another tool is already named '${tool.function.name}'; tool names must be unique.`,
        });
      }
      toolNames.add(tool.function.name);
    });
    if (body.tool_choice && body.tool_choice !== "none" && toolNames.size === 0) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: "tool_choice is only allowed when tools are specified." });
    }
    if (typeof body.tool_choice === "object" && body.tool_choice && toolNames.size && !toolNames.has(body.tool_choice.function.name)) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: `tool_choice names '${body.tool_choice.function.name}', which is not in tools.` });
    }
    if (body.parallel_tool_calls !== null && body.parallel_tool_calls !== undefined && toolNames.size === 0) {
      ctx.addIssue({ code: "custom", path: ["parallel_tool_calls"], message: "parallel_tool_calls is only allowed when tools are specified." });
    }
    const schemas = [
      ...(body.tools ?? []).map((tool) => tool.function.parameters),
      body.response_format?.type === "json_schema" ? body.response_format.json_schema.schema : undefined,
    ];
    checkSchemaValueBudget(schemas, body.tools?.length ? "tools" : "response_format", ctx);
    body.messages.forEach((message, index) => {
      if (message.role === "assistant" && (message.content === null || message.content === undefined) && !message.tool_calls?.length) {
        ctx.addIssue({ code: "custom", path: ["messages", index, "content"], message: "an assistant message needs content or tool_calls." });
      }
    });
  });

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;
export type ChatMessageInput = z.infer<typeof ChatMessageSchema>;

/** The OpenAI fields of a chat request; any other field is a backend-specific parameter. */
export const CHAT_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(ChatCompletionRequestSchema.shape));
