import { describe, expect, it } from "vitest";
import { ModelRegistry } from "../../../../models/modelRegistry.ts";
import type { ModelEntry } from "../../../../models/modelRegistrySchema.ts";
import { JsonSchemaValidator } from "../shared/jsonSchemas/jsonSchemaProblem.ts";
import { assertModelTakes } from "../shared/requestParameters.ts";
import { toStoredItems } from "./responseItems.ts";
import { RESPONSE_PARAMETERS } from "./responseParameters.ts";
import { RESPONSE_REQUEST_FIELDS, ResponseRequestSchema } from "./responseRequestSchema.ts";
import { responseSettings, toResponseChatRequest } from "./toResponseChatRequest.ts";

const plain = { chat: true, completions: false, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false };
const base = { owned_by: "lab", context_length: 8192, pricing: { input_per_million_chf: 1, output_per_million_chf: 2 } };
const engine = { type: "upstream", baseUrl: "http://127.0.0.1:1/v1", model: "m" } as const;
const registry = new ModelRegistry("t", [
  { ...base, id: "plain", engine, capabilities: plain },
  { ...base, id: "able", engine, capabilities: { ...plain, tools: true, json_schema: true, logprobs: true, reasoning: true } },
  { ...base, id: "tuned", engine, capabilities: plain, defaults: { temperature: 0.7, top_p: 0.9 } },
] satisfies ModelEntry[]);
const schemas = new JsonSchemaValidator();

const request = (model: string, fields: Record<string, unknown>) => {
  const body = ResponseRequestSchema.parse({ model, input: "Hi", ...fields });
  return toResponseChatRequest(body, toStoredItems(body.input), registry.get(model)!, schemas);
};
const tool = { type: "function", name: "lookup", parameters: { type: "object", properties: {} } };

describe("toResponseChatRequest: what a model without a capability is refused (the Responses field named)", () => {
  it.each([
    ["tools", { tools: [tool] }, "tools", "The model 'plain' does not support tools."],
    [
      "tools with tool_choice and parallel_tool_calls",
      { tools: [tool], tool_choice: "required", parallel_tool_calls: false },
      "tools",
      "The model 'plain' does not support tools.",
    ],
    [
      "text.format json_schema",
      { text: { format: { type: "json_schema", name: "x", schema: { type: "object" } } } },
      "text.format",
      "The model 'plain' does not support text.format json_schema.",
    ],
    ["text.format json_object", { text: { format: { type: "json_object" } } }, "text.format", "The model 'plain' does not support text.format json_object."],
    [
      "reasoning.effort",
      { reasoning: { effort: "low" } },
      "reasoning.effort",
      "The model 'plain' does not support reasoning.effort (it is not a reasoning model).",
    ],
    ["include logprobs", { include: ["message.output_text.logprobs"] }, "include", "The model 'plain' does not support include."],
    ["top_logprobs", { top_logprobs: 3 }, "include", "The model 'plain' does not support include."],
    [
      "the first of several, in the table's order",
      { text: { format: { type: "json_object" } }, tools: [tool], include: ["message.output_text.logprobs"] },
      "tools",
      "The model 'plain' does not support tools.",
    ],
  ])("%s", (_, fields, param, message) => {
    expect(() => request("plain", fields)).toThrow(expect.objectContaining({ message, param, code: "unsupported_parameter" }));
  });

  it.each([
    ["tool_choice auto without tools", { tool_choice: "auto" }],
    ["text.format text", { text: { format: { type: "text" }, verbosity: "low" } }],
    ["reasoning.summary alone", { reasoning: { summary: "auto" } }],
    ["top_logprobs 0", { top_logprobs: 0 }],
    ["another include value", { include: ["reasoning.encrypted_content"] }],
  ])("takes %s on any chat model", (_, fields) => {
    expect(request("plain", fields)).toMatchObject({ messages: [{ role: "user", content: "Hi" }] });
  });

  it("passes each field on where the model has the capability", () => {
    const engineRequest = request("able", {
      tools: [tool],
      tool_choice: "required",
      parallel_tool_calls: false,
      text: { format: { type: "json_object" } },
      reasoning: { effort: "high" },
      include: ["message.output_text.logprobs"],
      top_logprobs: 2,
    });
    expect(engineRequest).toMatchObject({
      toolChoice: "required",
      parallelToolCalls: false,
      responseFormat: { type: "json_object" },
      reasoningEffort: "high",
      logprobs: true,
      topLogprobs: 2,
    });
  });
});

describe("RESPONSE_PARAMETERS: the one table the request schema and the capability checks derive from", () => {
  it("gives the request schema its fields, in the table's order", () => {
    expect(Object.keys(ResponseRequestSchema.shape)).toEqual(Object.keys(RESPONSE_PARAMETERS));
    expect([...RESPONSE_REQUEST_FIELDS]).toEqual(Object.keys(RESPONSE_PARAMETERS));
  });

  it("checks a field needing a capability by the table (the model's capability decides)", () => {
    const body = ResponseRequestSchema.parse({ model: "plain", input: "Hi", reasoning: { effort: "low" } });
    expect(() => assertModelTakes(RESPONSE_PARAMETERS, body, registry.get("plain")!)).toThrow(expect.objectContaining({ param: "reasoning.effort" }));
    expect(() => assertModelTakes(RESPONSE_PARAMETERS, { ...body, model: "able" }, registry.get("able")!)).not.toThrow();
  });
});

describe("responseSettings: what the Response object reports is what applied", () => {
  const settings = (model: string, fields: Record<string, unknown>) => {
    const body = ResponseRequestSchema.parse({ model, input: "Hi", ...fields });
    return responseSettings(body, toResponseChatRequest(body, toStoredItems(body.input), registry.get(model)!, schemas));
  };

  it("reports the output cap that applied: the client's, else the default 150, null when a reasoning model's backend chooses", () => {
    expect(settings("plain", { max_output_tokens: 12 }).max_output_tokens).toBe(12);
    expect(settings("plain", {}).max_output_tokens).toBe(150);
    expect(settings("able", {}).max_output_tokens).toBeNull();
    expect(settings("able", { max_output_tokens: 40 }).max_output_tokens).toBe(40);
  });

  it("reports the sampling that applied: the client's, else the model's defaults, else OpenAI's 1", () => {
    expect(settings("tuned", {})).toMatchObject({ temperature: 0.7, top_p: 0.9 });
    expect(settings("tuned", { temperature: 0, top_p: 0.5 })).toMatchObject({ temperature: 0, top_p: 0.5 });
    expect(settings("plain", {})).toMatchObject({ temperature: 1, top_p: 1 });
  });

  it("echoes safety_identifier and prompt_cache_key, null when not sent", () => {
    expect(settings("plain", { safety_identifier: "user-7", prompt_cache_key: "k1" })).toMatchObject({ safety_identifier: "user-7", prompt_cache_key: "k1" });
    expect(settings("plain", {})).toMatchObject({ safety_identifier: null, prompt_cache_key: null });
  });
});

describe("toResponseChatRequest: chat fields the Responses API has its own field for", () => {
  it.each([
    ["response_format", { response_format: { type: "json_object" } }, "moved to 'text.format'"],
    ["messages", { messages: [{ role: "user", content: "x" }] }, "moved to 'input'"],
    ["logprobs", { logprobs: true }, "moved to 'include'"],
    ["max_tokens", { max_tokens: 5 }, "moved to 'max_output_tokens'"],
    ["max_completion_tokens", { max_completion_tokens: 5 }, "moved to 'max_output_tokens'"],
    ["reasoning_effort", { reasoning_effort: "low" }, "moved to 'reasoning.effort'"],
    ["n", { n: 2 }, "is not supported with the Responses API"],
  ])("refuses %s (400 unsupported_parameter naming it), rather than applying or dropping it unseen", (name, fields, says) => {
    expect(() => request("able", fields)).toThrow(
      expect.objectContaining({ param: name, code: "unsupported_parameter", message: expect.stringContaining(says) }),
    );
  });

  it("takes them as not set when null, and still honours chat's own sampling fields", () => {
    expect(request("plain", { response_format: null, messages: null, seed: 7, stop: ["x"] })).toMatchObject({ seed: 7, stop: ["x"] });
  });

  it("names the Responses place of a JSON Schema problem (text.format.schema, tools[i].parameters)", () => {
    expect(() => request("able", { text: { format: { type: "json_schema", name: "n", schema: { type: "nonsense" } } } })).toThrow(
      expect.objectContaining({ param: expect.stringMatching(/^text\.format\.schema/) }),
    );
    expect(() => request("able", { tools: [{ ...tool, parameters: { type: "nonsense" } }] })).toThrow(
      expect.objectContaining({ param: expect.stringMatching(/^tools\[0\]\.parameters/) }),
    );
  });
});
