import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelCapabilities } from "../../../src/models/modelCapabilities.ts";
import { type ChatRequest, type Engine, EngineError, type ToolDefinition } from "../../../workers/engines/engine.ts";
import { collectChat, cosine, norm, userChat } from "./engineTestKit.ts";

/** What the suite runs on: a loaded engine, a prompt it answers with at least a few tokens, and how to end it. */
export type ConformanceSubject = { engine: Engine; prompt: string; close?: () => Promise<void> };

/** The capabilities the engine is set up to declare: the suite checks it does, then gates its tests on them. */
export type DeclaredCapabilities = ModelCapabilities & { continuation: boolean };

const tools: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather of a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", enum: ["Bern", "Zurich"] }, celsius: { type: "boolean" } },
        required: ["city", "celsius"],
      },
    },
  },
  { type: "function", function: { name: "get_time", description: "The time", parameters: { type: "object", properties: {} } } },
];

const answerSchema = {
  type: "object",
  properties: { colour: { type: "string", enum: ["red", "green", "blue"] }, ok: { type: "boolean" }, count: { enum: [1, 2, 3] } },
  required: ["colour", "ok", "count"],
  additionalProperties: false,
};

const sumTokens = (deltas: Array<{ tokens?: number }>): number => deltas.reduce((sum, delta) => sum + (delta.tokens ?? Number.NaN), 0);

/**
 * The behaviour every engine adapter (workers/engines/) must have, whatever serves the model: the
 * worker relies on nothing else. Run it for each adapter (test/engines/*.conformance.int.test.ts).
 * A test that needs a capability runs only when the engine declares it; when it does not, the suite
 * checks that the engine refuses such a request cleanly instead. `make` may be called more than once
 * (the close test ends its own engine).
 */
export function describeEngineConformance(name: string, declared: DeclaredCapabilities, make: () => Promise<ConformanceSubject>): void {
  describe(`engine conformance: ${name}`, () => {
    let subject: ConformanceSubject;
    let engine: Engine;
    const chat = (request: ChatRequest, signal?: AbortSignal) => collectChat(engine, request, signal);
    const prompt = () => subject.prompt;

    beforeAll(async () => {
      subject = await make();
      engine = subject.engine;
    });
    afterAll(async () => {
      await (subject?.close ?? (() => engine?.close()))();
    });

    it("declares the capabilities the suite is gated on, and a context length", () => {
      expect(engine.capabilities()).toMatchObject(declared);
      expect(engine.capabilities().contextLength).toBeGreaterThan(0);
      expect(engine.maxConcurrency()).toBeGreaterThanOrEqual(1);
    });

    if (declared.chat)
      describe("chat", () => {
        it("streams deltas whose concatenation is the answer, then finishes with usage", async () => {
          const out = await chat(userChat(prompt(), { maxTokens: 24 }));
          expect(out.text.length).toBeGreaterThan(0);
          expect(out.deltas.every((delta) => (delta.content ?? "") !== "" || delta.toolCalls !== undefined || delta.reasoning !== undefined)).toBe(true);
          expect(["stop", "length"]).toContain(out.result.finishReason);
          expect(out.result.usage.promptTokens).toBeGreaterThan(0);
          expect(out.result.usage.completionTokens).toBeGreaterThan(0);
          expect(out.result.usage.completionTokens).toBeLessThanOrEqual(24);
          expect(out.result.usage.reasoningTokens).toBe(0);
        });

        it("ends with finish_reason length at max tokens, having generated exactly that many", async () => {
          const out = await chat(userChat(prompt(), { maxTokens: 3 }));
          expect(out.result.finishReason).toBe("length");
          expect(out.result.usage.completionTokens).toBe(3);
        });

        it("counts on every delta the tokens generated for it: together the completion tokens (but an end-of-generation token)", async () => {
          for (const maxTokens of [5, 24]) {
            const out = await chat(userChat(prompt(), { maxTokens }));
            for (const delta of out.deltas) expect(Number.isInteger(delta.tokens) && delta.tokens! >= 1).toBe(true);
            const counted = sumTokens(out.deltas);
            expect(counted).toBeLessThanOrEqual(out.result.usage.completionTokens);
            expect(counted).toBeGreaterThanOrEqual(out.result.usage.completionTokens - (out.result.finishReason === "length" ? 0 : 1));
          }
        });

        it("stops at a stop sequence and leaves it out", async () => {
          const full = await chat(userChat(prompt(), { maxTokens: 24 }));
          // Two characters from the middle of the answer, where they first occur.
          let at = Math.floor(full.text.length / 2);
          while (at + 2 <= full.text.length && (full.text.indexOf(full.text.slice(at, at + 2)) !== at || full.text.slice(at, at + 2).includes("\uFFFD")))
            at += 1;
          expect(at + 2).toBeLessThanOrEqual(full.text.length);
          const stop = full.text.slice(at, at + 2);
          const stopped = await chat(userChat(prompt(), { maxTokens: 24, stop: ["never-appears-0", stop] }));
          expect(stopped.text).toBe(full.text.slice(0, at));
          expect(stopped.result.finishReason).toBe("stop");
        });

        it("refuses a prompt longer than its context as an invalid request, and stays usable", async () => {
          const contextLength = engine.capabilities().contextLength;
          // Each repetition is at least one token whatever the tokenizer.
          const long = `${prompt()} `.repeat(contextLength + 1);
          const error = await chat(userChat(long)).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(EngineError);
          expect(error).toMatchObject({ kind: "invalid_request" });
          expect((await chat(userChat(prompt(), { maxTokens: 2 }))).result.usage.completionTokens).toBeGreaterThan(0);
        });
      });

    if (declared.completions)
      describe("text completions (a prompt served as a chat of one user message)", () => {
        it("streams the completion and counts the prompt", async () => {
          const out = await chat({ ...userChat(prompt(), { maxTokens: 8 }), messages: [{ role: "user", content: prompt() }] });
          expect(out.text.length).toBeGreaterThan(0);
          expect(out.result.usage.promptTokens).toBeGreaterThan(0);
          expect(out.result.usage.completionTokens).toBeGreaterThan(0);
        });
      });

    describe("token counting", () => {
      it("counts text and chat prompts: more text, more tokens; a chat at least its text, tools add to it", async () => {
        const one = await engine.countTokens(prompt());
        expect(one).toBeGreaterThan(0);
        expect(await engine.countTokens(`${prompt()} ${prompt()} ${prompt()}`)).toBeGreaterThan(one);
        const messages = [{ role: "user" as const, content: prompt() }];
        const chatTokens = await engine.countChatTokens(messages);
        expect(chatTokens).toBeGreaterThanOrEqual(one);
        if (declared.tools) expect(await engine.countChatTokens(messages, tools)).toBeGreaterThan(chatTokens);
      });
    });

    describe("cancellation", () => {
      it("rejects with an AbortError when aborted mid-stream, delivers at most one delta after, and stays usable", async () => {
        const controller = new AbortController();
        let deltasAfterAbort = 0;
        const format = declared.json_schema ? { responseFormat: { type: "json_object" as const } } : {};
        const pending = engine.chat(
          userChat(prompt(), { maxTokens: 400, ...format }),
          () => {
            if (controller.signal.aborted) deltasAfterAbort += 1;
            else controller.abort();
          },
          controller.signal,
        );
        await expect(pending).rejects.toMatchObject({ name: "AbortError" });
        expect(deltasAfterAbort).toBeLessThanOrEqual(1);
        expect((await chat(userChat(prompt(), { maxTokens: 4 }))).result.usage.completionTokens).toBeGreaterThan(0);
      });

      it("rejects with an AbortError when the signal is already aborted, sending nothing", async () => {
        const deltas: unknown[] = [];
        await expect(engine.chat(userChat(prompt(), { maxTokens: 4 }), (d) => deltas.push(d), AbortSignal.abort())).rejects.toMatchObject({
          name: "AbortError",
        });
        expect(deltas).toEqual([]);
      });
    });

    if (declared.continuation)
      describe("continuation (continueFrom)", () => {
        it("continues a reply already begun as the same reply: only new deltas, the prompt counted once", async () => {
          const request = userChat(prompt(), { maxTokens: 24 });
          const full = await chat(request);
          const half = full.deltas.slice(0, Math.max(1, Math.floor(full.deltas.length / 2)));
          const begun = half.map((delta) => delta.content ?? "").join("");
          const sampled = sumTokens(half);
          const continued = await collectChat(engine, { ...request, maxTokens: 24 - sampled }, undefined, { continueFrom: begun, continuedTokens: sampled });
          expect(continued.result.usage.promptTokens).toBe(full.result.usage.promptTokens);
          expect(continued.result.usage.completionTokens).toBeGreaterThan(0);
          expect(continued.result.usage.completionTokens).toBeLessThanOrEqual(24 - sampled);
          // Greedy decoding from the same tokens gives the rest of the same reply, when the begun text
          // tokenizes back into the tokens that were sampled (a different split of it would not).
          if ((await engine.countTokens(begun)) === sampled) {
            expect(begun + continued.text).toBe(full.text);
            expect(continued.result.finishReason).toBe(full.result.finishReason);
          }
        });
      });

    if (declared.tools)
      describe("tool calls", () => {
        it("calls a tool forced by name: one call with an id, the name and JSON arguments, finish_reason stop (as OpenAI's)", async () => {
          const out = await chat(
            userChat("What is the weather in Bern?", { maxTokens: 200, tools, toolChoice: { type: "function", function: { name: "get_weather" } } }),
          );
          expect(out.result.finishReason).toBe("stop");
          expect(out.text).toBe("");
          expect(out.toolCalls).toHaveLength(1);
          const call = out.toolCalls[0]!;
          expect(call.id).toMatch(/^call_\w+$/);
          expect(call.function.name).toBe("get_weather");
          const args = JSON.parse(call.function.arguments) as { city: string; celsius: boolean };
          expect(["Bern", "Zurich"]).toContain(args.city);
          expect(typeof args.celsius).toBe("boolean");
          expect(sumTokens(out.deltas)).toBeLessThanOrEqual(out.result.usage.completionTokens);
        });

        it("calls some tool when tool_choice is required", async () => {
          const out = await chat(userChat("What time is it?", { maxTokens: 200, tools, toolChoice: "required", parallelToolCalls: false }));
          expect(out.result.finishReason).toBe("tool_calls");
          expect(out.toolCalls).toHaveLength(1);
          expect(["get_weather", "get_time"]).toContain(out.toolCalls[0]!.function.name);
          expect(typeof JSON.parse(out.toolCalls[0]!.function.arguments)).toBe("object");
        });
      });
    if (!declared.tools)
      describe("without tools", () => {
        it("refuses tools as an invalid request naming tools, but takes them with tool_choice none", async () => {
          await expect(chat(userChat(prompt(), { tools }))).rejects.toMatchObject({ name: "EngineError", kind: "invalid_request", param: "tools" });
          expect((await chat(userChat(prompt(), { tools, toolChoice: "none", maxTokens: 4 }))).result.usage.completionTokens).toBeGreaterThan(0);
        });
      });

    if (declared.json_schema)
      describe("json_schema", () => {
        it("writes JSON valid against a json_schema response format", async () => {
          const out = await chat(
            userChat(prompt(), {
              maxTokens: 200,
              temperature: 1,
              seed: 1,
              responseFormat: { type: "json_schema", json_schema: { name: "answer", schema: answerSchema } },
            }),
          );
          expect(out.result.finishReason).toBe("stop");
          const value = JSON.parse(out.text) as { colour: string; ok: boolean; count: number };
          expect(["red", "green", "blue"]).toContain(value.colour);
          expect(typeof value.ok).toBe("boolean");
          expect([1, 2, 3]).toContain(value.count);
        });
      });
    if (!declared.json_schema)
      describe("without json_schema", () => {
        it("refuses a response format as an invalid request naming response_format", async () => {
          const responseFormat = { type: "json_schema" as const, json_schema: { name: "answer", schema: answerSchema } };
          await expect(chat(userChat(prompt(), { responseFormat }))).rejects.toMatchObject({
            name: "EngineError",
            kind: "invalid_request",
            param: "response_format",
          });
        });
      });

    if (declared.logprobs)
      describe("logprobs", () => {
        it("returns OpenAI-shaped logprobs whose bytes are the text, with the requested alternatives", async () => {
          const out = await chat(userChat(prompt(), { logprobs: true, topLogprobs: 3, maxTokens: 12 }));
          expect(out.logprobs.length).toBeGreaterThan(0);
          expect(Buffer.from(out.logprobs.flatMap((entry) => entry.bytes)).toString("utf8")).toBe(out.text);
          for (const entry of out.logprobs) {
            expect(entry.logprob).toBeLessThanOrEqual(0);
            expect(entry.top_logprobs).toHaveLength(3);
            const values = entry.top_logprobs.map((top) => top.logprob);
            expect([...values].sort((a, b) => b - a)).toEqual(values);
          }
        });
      });
    if (!declared.logprobs)
      describe("without logprobs", () => {
        it("refuses logprobs as an invalid request naming logprobs", async () => {
          await expect(chat(userChat(prompt(), { logprobs: true }))).rejects.toMatchObject({ name: "EngineError", kind: "invalid_request", param: "logprobs" });
        });
      });

    if (declared.reasoning)
      describe("reasoning", () => {
        it("streams thoughts apart from the answer and counts them within the completion tokens", async () => {
          const out = await chat(userChat(prompt(), { maxTokens: 48, reasoningEffort: "low" }));
          expect(out.reasoning.length).toBeGreaterThan(0);
          expect(out.deltas.every((delta) => delta.content === undefined || delta.reasoning === undefined)).toBe(true);
          expect(out.result.usage.reasoningTokens).toBeGreaterThan(0);
          expect(out.result.usage.reasoningTokens).toBeLessThanOrEqual(out.result.usage.completionTokens);
        });
      });

    if (declared.embeddings)
      describe("embeddings", () => {
        it("embeds texts in order as unit vectors of one length; identical texts, identical vectors", async () => {
          const texts = ["The weather is fine today.", "The weather is fine today.", "Completely different words here"];
          const { embeddings, promptTokens } = await engine.embed(texts, new AbortController().signal);
          expect(embeddings).toHaveLength(3);
          expect(promptTokens).toBeGreaterThanOrEqual(3);
          expect(new Set(embeddings.map((vector) => vector.length)).size).toBe(1);
          for (const vector of embeddings) expect(norm(vector)).toBeCloseTo(1, 5);
          expect(cosine(embeddings[0]!, embeddings[1]!)).toBeCloseTo(1, 6);
          expect(cosine(embeddings[0]!, embeddings[2]!)).toBeLessThan(0.999999);
        });
      });
    if (!declared.embeddings)
      describe("without embeddings", () => {
        it("refuses embeddings as an invalid request naming the model", async () => {
          await expect(engine.embed(["x"], new AbortController().signal)).rejects.toMatchObject({
            name: "EngineError",
            kind: "invalid_request",
            param: "model",
          });
        });
      });

    it("once closed, refuses calls as unavailable", async () => {
      const own = await make();
      await (own.close ?? (() => own.engine.close()))();
      await expect(collectChat(own.engine, userChat(own.prompt, { maxTokens: 2 }))).rejects.toMatchObject({ name: "EngineError", kind: "unavailable" });
    });
  });
}
