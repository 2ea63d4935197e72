import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import { EngineError } from "../../workers/engines/engine.ts";
import type { ChatRequest, ToolDefinition } from "../../workers/engines/engine.ts";
import { collectChat, userChat, type Collected } from "../support/engines/engineTestKit.ts";

const MODEL = fileURLToPath(new URL("../../models/austen-1m.gguf", import.meta.url));

const SCHEMA = {
  type: "object",
  properties: {
    names: { type: "array", items: { type: "string", maxLength: 12 }, minItems: 3, maxItems: 6 },
    count: { type: "integer" },
  },
  required: ["names", "count"],
  additionalProperties: false,
};

const WEATHER: ToolDefinition = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 16 },
        days: { type: "integer" },
        notes: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 3 },
      },
      required: ["city", "days", "notes"],
      additionalProperties: false,
    },
  },
};

const schemaRequest = (overrides: Partial<ChatRequest> = {}): ChatRequest =>
  userChat("Name the Bennet sisters.", {
    maxTokens: 200,
    temperature: 1,
    seed: 3,
    responseFormat: { type: "json_schema", json_schema: { name: "sisters", schema: SCHEMA } },
    ...overrides,
  });

/** The completion tokens the deltas carry, summed. */
const deltaTokens = (out: Collected): number => out.deltas.reduce((sum, delta) => sum + (delta.tokens ?? 0), 0);

/**
 * A reply held to a grammar that a worker began and died during is continued on the embedded engine
 * (ChatOptions.continueFrom): the text already sent is generated again under the grammar (its tokens
 * forced), and only what follows it is sent and counted; the whole reply matches the schema.
 */
describe("the embedded engine continuing a reply held to a grammar", () => {
  let engine: EmbeddedEngine;
  const ajv = new Ajv();
  beforeAll(async () => {
    engine = await EmbeddedEngine.load({ modelPath: MODEL, threads: 1, maxConcurrency: 1, contextSize: 1024 }, { llama: await createLlama({ gpu: false }) });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("says it can", () => {
    expect(engine.capabilities().grammarContinuation).toBe(true);
  });

  it.each([
    [0, 1],
    [2, 7],
    [2, 8],
    [2, 9],
  ])(
    "continues a json_schema reply at temperature %d (seed %d) from any point into a reply that matches the schema",
    async (temperature, seed) => {
      const first = await collectChat(engine, schemaRequest({ seed }));
      expect(first.result.finishReason).toBe("stop");
      expect(ajv.validate(SCHEMA, JSON.parse(first.text))).toBe(true);
      for (const share of [0.2, 0.5, 0.8]) {
        const prefix = first.text.slice(0, Math.max(1, Math.floor(first.text.length * share)));
        const maxTokens = 150;
        const second = await collectChat(engine, schemaRequest({ maxTokens, temperature, seed: seed + 100 }), undefined, { continueFrom: prefix });
        const whole = prefix + second.text;
        expect(second.result.finishReason, whole).toBe("stop");
        expect(ajv.validate(SCHEMA, JSON.parse(whole)), `${whole}: ${ajv.errorsText()}`).toBe(true);
        // Only the new tokens are counted (the forced ones were counted when they were first sent).
        expect(second.result.usage.completionTokens).toBeGreaterThan(0);
        expect(second.result.usage.completionTokens).toBeLessThanOrEqual(maxTokens);
        expect(second.result.usage.completionTokens).toBeLessThan(first.result.usage.completionTokens + 20);
        expect(deltaTokens(second)).toBeLessThanOrEqual(second.result.usage.completionTokens);
        expect(second.result.usage.promptTokens).toBe(first.result.usage.promptTokens);
      }
    },
    120_000,
  );

  it("continues a json_object reply where the grammar stands after the text sent", async () => {
    // The JSON grammar started again at its root would allow only a new object ("{") here; advanced over
    // the text sent it allows only the rest of `true`.
    for (const seed of [6, 7, 8]) {
      const request = userChat("Describe Mr. Darcy as JSON.", { maxTokens: 20, temperature: 2, seed, responseFormat: { type: "json_object" } });
      const prefix = '{"name": "Darcy", "proud": tr';
      const second = await collectChat(engine, request, undefined, { continueFrom: prefix });
      expect(second.text).toMatch(/^ue\s*[,}]/);
      expect(second.result.usage.completionTokens).toBeLessThanOrEqual(20);
    }
  }, 60_000);

  it("ends by length within the tokens left, counting only the new ones", async () => {
    const first = await collectChat(engine, schemaRequest());
    const prefix = first.text.slice(0, Math.floor(first.text.length / 2));
    const second = await collectChat(engine, schemaRequest({ maxTokens: 3, temperature: 2, seed: 11 }), undefined, { continueFrom: prefix });
    expect(second.result.finishReason).toBe("length");
    expect(second.result.usage.completionTokens).toBe(3);
    expect(deltaTokens(second)).toBeLessThanOrEqual(3);
  }, 60_000);

  it("continues a tool call forced by name: argument deltas only (no id or name again), the whole arguments match the parameters", async () => {
    const request = userChat("What is the weather in Bath?", {
      maxTokens: 200,
      temperature: 1,
      seed: 4,
      tools: [WEATHER],
      toolChoice: { type: "function", function: { name: "get_weather" } },
    });
    const first = await collectChat(engine, request);
    // Forced by name: "stop", as OpenAI ends such a call.
    expect(first.result.finishReason).toBe("stop");
    const args = first.toolCalls[0]!.function.arguments;
    expect(ajv.validate(WEATHER.function.parameters!, JSON.parse(args))).toBe(true);
    for (const [prefix, temperature] of [
      [args.slice(0, Math.floor(args.length / 2)), 2],
      [args.slice(0, 3), 0],
      ["", 2],
    ] as const) {
      const second = await collectChat(engine, { ...request, temperature, seed: 12 }, undefined, { continueFrom: prefix });
      expect(second.result.finishReason).toBe("stop");
      const calls = second.deltas.flatMap((delta) => delta.toolCalls ?? []);
      expect(calls.length).toBeGreaterThan(0);
      expect(calls.every((call) => call.index === 0 && call.id === undefined && call.function?.name === undefined)).toBe(true);
      const whole = prefix + calls.map((call) => call.function?.arguments ?? "").join("");
      expect(ajv.validate(WEATHER.function.parameters!, JSON.parse(whole)), whole).toBe(true);
      expect(second.text).toBe("");
    }
  }, 120_000);

  it("refuses, sending nothing, text the grammar cannot generate again", async () => {
    const deltas: unknown[] = [];
    const error = await engine
      .chat(schemaRequest(), (delta) => deltas.push(delta), new AbortController().signal, { continueFrom: '{"other": ' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).message).toMatch(/could not be generated again/);
    expect(deltas).toEqual([]);
  }, 60_000);

  it('still refuses to continue a reply with tool_choice "auto"', async () => {
    const error = await engine
      .chat(userChat("Weather?", { tools: [WEATHER], toolChoice: "auto" }), () => undefined, new AbortController().signal, { continueFrom: "It is" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).message).toMatch(/tool_choice "auto" cannot be continued/);
  }, 60_000);
});
