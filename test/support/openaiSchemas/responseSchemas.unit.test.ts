import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { openAiShapeErrors, type OpenAiShape, responseStreamEventErrors, STREAM_EVENT_DEFINITIONS } from "./openaiSchemas.ts";

/**
 * The Responses API schemas against OpenAI's own reference examples (openaiReferenceExamples.json, copied from
 * openai/openai-openapi): the examples that agree with OpenAI's schema are accepted as they are; the few that
 * contradict it (older examples) are rejected for exactly that reason and accepted once it is mended; and
 * broken payloads are rejected.
 */
type Json = Record<string, any>;
const examples = JSON.parse(readFileSync(new URL("openaiReferenceExamples.json", import.meta.url), "utf8")) as {
  bodies: Record<string, Json>;
  events: Record<string, Json>;
};
const body = (name: string): Json => structuredClone(examples.bodies[name]!);
const event = (type: string): Json => structuredClone(examples.events[type]!);

/** The Response every reference event example builds on: OpenAI's response.created example. */
function runningResponse(): Json {
  return event("response.created").response;
}

describe("OpenAI's reference examples", () => {
  it.each([
    ["create: Text input", "response"],
    ["create: Reasoning", "response"],
    ["retrieve", "response"],
    ["cancel", "response"],
    ["Response schema example", "response"],
    ["delete", "response.deleted"],
    ["input_items", "response.input-items.list"],
  ] as const)("the %s body conforms to %s", (name, shape: OpenAiShape) => {
    expect(openAiShapeErrors(shape, body(name))).toEqual([]);
  });

  it.each([
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_item.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "error",
  ])("the %s event conforms", (type) => {
    expect(responseStreamEventErrors(event(type))).toEqual([]);
  });

  it("defines every event type the platform may emit, and no example lacks its definition", () => {
    for (const type of [
      "response.created",
      "response.queued",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.completed",
      "response.incomplete",
      "response.failed",
      "error",
      ...Object.keys(examples.events),
    ]) {
      expect(STREAM_EVENT_DEFINITIONS, type).toHaveProperty([type]);
    }
  });
});

describe("OpenAI's examples that contradict OpenAI's schema are rejected for that, and accepted once mended", () => {
  it("output_text.delta and .done without logprobs (required by the schema and the SDK's types)", () => {
    for (const type of ["response.output_text.delta", "response.output_text.done"]) {
      const example = event(type);
      expect(responseStreamEventErrors(example).join("\n")).toMatch(/required property 'logprobs'/);
      expect(responseStreamEventErrors({ ...example, logprobs: [] })).toEqual([]);
    }
  });

  it("response.failed without sequence_number", () => {
    const example = event("response.failed");
    expect(responseStreamEventErrors(example).join("\n")).toMatch(/required property 'sequence_number'/);
    expect(responseStreamEventErrors({ ...example, sequence_number: 7, response: { ...example.response, parallel_tool_calls: true } })).toEqual([]);
  });

  it("response.incomplete with reason max_tokens (the enum says max_output_tokens)", () => {
    const example = event("response.incomplete");
    expect(responseStreamEventErrors(example).join("\n")).toMatch(/reason must be equal to one of the allowed values/);
    const mended = { ...example, response: { ...example.response, parallel_tool_calls: true, incomplete_details: { reason: "max_output_tokens" } } };
    expect(responseStreamEventErrors(mended)).toEqual([]);
  });

  it("response.completed whose usage lacks input_tokens_details and whose message lacks status", () => {
    const example = event("response.completed");
    const errors = responseStreamEventErrors(example).join("\n");
    expect(errors).toMatch(/required property 'input_tokens_details'/);
    expect(errors).toMatch(/required property 'status'/);
    const response = example.response;
    response.parallel_tool_calls = true;
    response.output[0].status = "completed";
    response.usage.input_tokens_details = { cached_tokens: 0, cache_write_tokens: 0 };
    expect(responseStreamEventErrors(example)).toEqual([]);
  });

  it("the create: Functions body whose usage lacks input_tokens_details", () => {
    const example = body("create: Functions");
    expect(openAiShapeErrors("response", example).join("\n")).toMatch(/required property 'input_tokens_details'/);
    example.usage.input_tokens_details = { cached_tokens: 0, cache_write_tokens: 0 };
    expect(openAiShapeErrors("response", example)).toEqual([]);
  });

  it("response.queued with a placeholder Response (string timestamps, no fields); a full queued Response conforms", () => {
    expect(responseStreamEventErrors(event("response.queued")).join("\n")).toMatch(/created_at must be number/);
    expect(responseStreamEventErrors({ type: "response.queued", sequence_number: 0, response: { ...runningResponse(), status: "queued" } })).toEqual([]);
  });
});

describe("broken payloads are rejected", () => {
  const delta = { ...event("response.output_text.delta"), logprobs: [] };

  it.each([
    ["without sequence_number", () => ({ ...delta, sequence_number: undefined })],
    ["with a string sequence_number", () => ({ ...delta, sequence_number: "1" })],
    ["with a negative sequence_number", () => ({ ...delta, sequence_number: -1 })],
    ["of an unknown type", () => ({ ...delta, type: "response.output_text.chunk" })],
    ["without type", () => ({ ...delta, type: undefined })],
    ["output_text.delta without item_id", () => ({ ...delta, item_id: undefined })],
    ["output_text.delta without content_index", () => ({ ...delta, content_index: undefined })],
    ["response.created carrying a completed Response", () => ({ ...event("response.created"), response: { ...runningResponse(), status: "completed" } })],
    ["response.completed carrying an in_progress Response", () => ({ ...event("response.created"), type: "response.completed" })],
    ["an error event without param", () => ({ ...event("error"), param: undefined })],
    [
      "output_item.done with an in_progress item",
      () => ({ ...event("response.output_item.done"), item: { ...event("response.output_item.done").item, status: "in_progress" } }),
    ],
    [
      "a function_call item without call_id",
      () => ({
        type: "response.output_item.added",
        sequence_number: 2,
        output_index: 0,
        item: { type: "function_call", id: "fc_1", name: "get_weather", arguments: "", status: "in_progress" },
      }),
    ],
  ])("a stream event %s", (_label, make) => {
    expect(responseStreamEventErrors(JSON.parse(JSON.stringify(make())))).not.toEqual([]);
  });

  const completed = (): Json => body("retrieve");
  it.each([
    ["with status done", (r: Json) => ({ ...r, status: "done" })],
    ["without status", (r: Json) => ({ ...r, status: undefined })],
    ["with object chat.completion", (r: Json) => ({ ...r, object: "chat.completion" })],
    ["without output", (r: Json) => ({ ...r, output: undefined })],
    ["without parallel_tool_calls", (r: Json) => ({ ...r, parallel_tool_calls: undefined })],
    ["completed without usage", (r: Json) => ({ ...r, usage: null })],
    ["completed without completed_at", (r: Json) => ({ ...r, completed_at: undefined })],
    ["in_progress with a completed_at", (r: Json) => ({ ...r, status: "in_progress" })],
    ["failed without an error", (r: Json) => ({ ...r, status: "failed", completed_at: null, error: null })],
    [
      "failed with an error code OpenAI does not define",
      (r: Json) => ({ ...r, status: "failed", completed_at: null, error: { code: "redis_unavailable", message: "lost" } }),
    ],
    ["incomplete without incomplete_details", (r: Json) => ({ ...r, status: "incomplete", completed_at: null })],
    ["with usage in chat completions' names", (r: Json) => ({ ...r, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })],
    ["with usage lacking output_tokens_details", (r: Json) => ({ ...r, usage: { ...r.usage, output_tokens_details: undefined } })],
    ["with an output_text part lacking annotations", (r: Json) => ({ ...r, output: [{ ...r.output[0], content: [{ type: "output_text", text: "x" }] }] })],
    ["with a message of role user in output", (r: Json) => ({ ...r, output: [{ ...r.output[0], role: "user" }] })],
    ["with a function tool echoed without strict", (r: Json) => ({ ...r, tools: [{ type: "function", name: "f", parameters: {} }] })],
    ["with a metadata value that is not a string", (r: Json) => ({ ...r, metadata: { n: 1 } })],
  ])("a response %s", (_label, mutate) => {
    const broken = JSON.parse(JSON.stringify(mutate(completed())));
    expect(openAiShapeErrors("response", broken)).not.toEqual([]);
  });

  it("a deletion without deleted: true, and an input items list without has_more or with an item lacking its id", () => {
    expect(openAiShapeErrors("response.deleted", { ...body("delete"), deleted: false })).not.toEqual([]);
    expect(openAiShapeErrors("response.deleted", { ...body("delete"), object: "response.deleted" })).not.toEqual([]);
    const list = body("input_items");
    expect(openAiShapeErrors("response.input-items.list", { ...list, has_more: undefined })).not.toEqual([]);
    expect(openAiShapeErrors("response.input-items.list", { ...list, data: [{ ...list.data[0], id: undefined }] })).not.toEqual([]);
    expect(openAiShapeErrors("response.input-items.list", { ...list, data: [{ ...list.data[0], role: "tool" }] })).not.toEqual([]);
  });
});
