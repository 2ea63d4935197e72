import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineError } from "../../../workers/engines/engine.ts";
import type { ChatRequest, ToolDefinition } from "../../../workers/engines/engine.ts";
import { createLlama } from "../../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../../workers/engines/embedded/embeddedEngine.ts";
import { collectChat, cosine, norm, userChat } from "./engineTestKit.ts";

export type SuiteModel = { modelPath: string; contextSize: number; prompt: string };

const weatherTools: ToolDefinition[] = [
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

/** The engine checks every model must pass: properties, not exact strings (outputs vary with the thread count). */
export function embeddedEngineSuite(name: string, setup: () => Promise<SuiteModel>): void {
  describe(`EmbeddedEngine on ${name}`, () => {
    let model: SuiteModel;
    let engine: EmbeddedEngine;
    const chat = (request: ChatRequest, signal?: AbortSignal) => collectChat(engine, request, signal);

    beforeAll(async () => {
      model = await setup();
      const llama = await createLlama({ gpu: false });
      engine = await EmbeddedEngine.load({ modelPath: model.modelPath, threads: 1, maxConcurrency: 2, contextSize: model.contextSize }, { llama });
    });
    afterAll(async () => {
      await engine?.close();
    });

    it("streams deltas whose concatenation is the answer, token by token", async () => {
      const out = await chat(userChat(model.prompt, { logprobs: true, maxTokens: 24 }));
      expect(out.text.length).toBeGreaterThan(0);
      expect(out.deltas.every((delta) => (delta.content ?? "") !== "" || (delta.logprobs?.length ?? 0) > 0)).toBe(true);
      const bytes = out.logprobs.flatMap((entry) => entry.bytes);
      expect(Buffer.from(bytes).toString("utf8")).toBe(out.text);
      expect(["stop", "length"]).toContain(out.result.finishReason);
    });

    it("stops before a stop sequence that spans two tokens and leaves it out", async () => {
      const base = await chat(userChat(model.prompt, { logprobs: true, maxTokens: 24 }));
      const tokens = base.logprobs.map((entry) => entry.token);
      let stop: string | null = null;
      let cut = 0;
      let offset = 0;
      for (let k = 0; k + 1 < tokens.length && stop === null; k += 1) {
        offset += tokens[k]!.length;
        const candidate = tokens[k]!.slice(-1) + tokens[k + 1]!.slice(0, 1);
        if (candidate.length === 2 && !candidate.includes("\uFFFD") && base.text.indexOf(candidate) === offset - 1) {
          stop = candidate;
          cut = offset - 1;
        }
      }
      expect(stop).not.toBeNull();
      const stopped = await chat(userChat(model.prompt, { maxTokens: 24, stop: ["never-appears-0", stop!] }));
      expect(stopped.text).toBe(base.text.slice(0, cut));
      expect(stopped.text).not.toContain(stop!);
      expect(stopped.result.finishReason).toBe("stop");
    });

    it("ends with finish_reason length at max tokens and counts generated tokens exactly", async () => {
      const out = await chat(userChat(model.prompt, { logprobs: true, maxTokens: 3 }));
      expect(out.result.finishReason).toBe("length");
      expect(out.result.usage.completionTokens).toBe(3);
      expect(out.logprobs).toHaveLength(3);
    });

    it("counts prompt tokens by tokenizing the rendered chat template", async () => {
      const messages = [
        { role: "system" as const, content: "You answer briefly." },
        { role: "user" as const, content: model.prompt },
      ];
      const out = await chat({ ...userChat(model.prompt, { maxTokens: 4 }), messages });
      const rendered = `${messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("")}<|im_start|>assistant\n`;
      const llamaModel = engine.model;
      const expected = llamaModel.tokenize(rendered, true).length + (llamaModel.tokens.shouldPrependBosToken ? 1 : 0);
      expect(out.result.usage.promptTokens).toBe(expected);
      expect(await engine.countChatTokens(messages)).toBe(expected);
      expect(await engine.countTokens(model.prompt)).toBe(llamaModel.tokenize(model.prompt).length);
    });

    it("counts completion tokens as the tokens generated (the end-of-generation token included)", async () => {
      const out = await chat(userChat(model.prompt, { logprobs: true, maxTokens: 200, temperature: 0.7, seed: 7 }));
      if (out.result.finishReason === "length") expect(out.result.usage.completionTokens).toBe(200);
      else expect(out.result.usage.completionTokens).toBe(out.logprobs.length + 1);
      expect(out.result.usage.reasoningTokens).toBe(0);
    });

    it("repeats itself with the same seed and threads", async () => {
      const request = userChat(model.prompt, { temperature: 1, seed: 1234, maxTokens: 32 });
      const first = await chat(request);
      const second = await chat(request);
      expect(second.text).toBe(first.text);
      expect(second.result).toEqual(first.result);
      const others = await Promise.all([1, 2, 3].map((seed) => chat({ ...request, seed })));
      expect(new Set([first.text, ...others.map((o) => o.text)]).size).toBeGreaterThan(1);
    });

    it("writes JSON in JSON mode", async () => {
      const out = await chat(userChat(model.prompt, { maxTokens: 120, responseFormat: { type: "json_object" } }));
      expect(out.text.trimStart().startsWith("{")).toBe(true);
      if (out.result.finishReason === "stop") expect(() => JSON.parse(out.text)).not.toThrow();
      else expect(out.result.usage.completionTokens).toBe(120);
    });

    it("writes JSON valid against a json_schema", async () => {
      const schema = {
        type: "object",
        properties: { colour: { type: "string", enum: ["red", "green", "blue"] }, ok: { type: "boolean" }, count: { enum: [1, 2, 3] } },
        required: ["colour", "ok", "count"],
        additionalProperties: false,
      };
      for (const seed of [1, 2]) {
        const out = await chat(
          userChat(model.prompt, { maxTokens: 200, temperature: 1, seed, responseFormat: { type: "json_schema", json_schema: { name: "answer", schema } } }),
        );
        expect(out.result.finishReason).toBe("stop");
        const value = JSON.parse(out.text) as { colour: string; ok: boolean; count: number };
        expect(["red", "green", "blue"]).toContain(value.colour);
        expect(typeof value.ok).toBe("boolean");
        expect([1, 2, 3]).toContain(value.count);
      }
    });

    it("calls a named tool", async () => {
      const out = await chat(
        userChat("What is the weather in Bern?", { maxTokens: 200, tools: weatherTools, toolChoice: { type: "function", function: { name: "get_weather" } } }),
      );
      expect(out.result.finishReason).toBe("tool_calls");
      expect(out.text).toBe("");
      expect(out.toolCalls).toHaveLength(1);
      const call = out.toolCalls[0]!;
      expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
      expect(call.function.name).toBe("get_weather");
      const args = JSON.parse(call.function.arguments) as { city: string; celsius: boolean };
      expect(["Bern", "Zurich"]).toContain(args.city);
      expect(typeof args.celsius).toBe("boolean");
    });

    it("calls some tool when tool_choice is required", async () => {
      const out = await chat(userChat("What time is it?", { maxTokens: 200, tools: weatherTools, toolChoice: "required", parallelToolCalls: false }));
      expect(out.result.finishReason).toBe("tool_calls");
      expect(out.toolCalls).toHaveLength(1);
      expect(["get_weather", "get_time"]).toContain(out.toolCalls[0]!.function.name);
      expect(typeof JSON.parse(out.toolCalls[0]!.function.arguments)).toBe("object");
    });

    it("does not call tools when tool_choice is none", async () => {
      const out = await chat(userChat(model.prompt, { maxTokens: 16, tools: weatherTools, toolChoice: "none" }));
      expect(out.toolCalls).toHaveLength(0);
      expect(["stop", "length"]).toContain(out.result.finishReason);
      expect(out.result.usage.promptTokens).toBe(await engine.countChatTokens([{ role: "user", content: model.prompt }]));
    });

    it("continues after a tool result, counting the prompt as countChatTokens does", async () => {
      const messages: ChatRequest["messages"] = [
        { role: "user", content: "What time is it?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_time", arguments: "{}" } }] },
        { role: "tool", content: '{"time":"12:00"}', tool_call_id: "call_1" },
      ];
      const out = await chat({ ...userChat("", { maxTokens: 16, tools: weatherTools }), messages });
      expect(["stop", "length", "tool_calls"]).toContain(out.result.finishReason);
      expect(out.result.usage.completionTokens).toBeGreaterThan(0);
      expect(out.result.usage.promptTokens).toBe(await engine.countChatTokens(messages, weatherTools));
    });

    it("returns OpenAI-shaped logprobs with the requested number of alternatives", async () => {
      const out = await chat(userChat(model.prompt, { logprobs: true, topLogprobs: 3, maxTokens: 12 }));
      expect(out.logprobs.length).toBeGreaterThan(0);
      for (const entry of out.logprobs) {
        expect(typeof entry.token).toBe("string");
        expect(entry.logprob).toBeLessThanOrEqual(0);
        expect(entry.bytes.every((byte) => Number.isInteger(byte) && byte >= 0 && byte < 256)).toBe(true);
        expect(entry.top_logprobs).toHaveLength(3);
        const values = entry.top_logprobs.map((top) => top.logprob);
        expect([...values].sort((a, b) => b - a)).toEqual(values);
        expect(values.every((value) => value <= 0)).toBe(true);
        // Greedy decoding picks the most likely token.
        expect(entry.top_logprobs[0]!.token).toBe(entry.token);
        expect(entry.top_logprobs[0]!.logprob).toBe(entry.logprob);
      }
    });

    it("embeds texts as unit vectors; identical texts have cosine 1", async () => {
      const texts = ["The weather is fine today.", "The weather is fine today.", "Completely different words here"];
      const { embeddings, promptTokens } = await engine.embed(texts, new AbortController().signal);
      expect(embeddings).toHaveLength(3);
      expect(promptTokens).toBeGreaterThanOrEqual(3);
      for (const vector of embeddings) expect(norm(vector)).toBeCloseTo(1, 6);
      expect(cosine(embeddings[0]!, embeddings[1]!)).toBeCloseTo(1, 6);
      expect(cosine(embeddings[0]!, embeddings[2]!)).toBeLessThan(0.999999);
    });

    it("aborts mid-stream and stays usable", async () => {
      const controller = new AbortController();
      let deltasAfterAbort = 0;
      const pending = engine.chat(
        userChat(model.prompt, { maxTokens: 400, responseFormat: { type: "json_object" } }),
        () => {
          if (controller.signal.aborted) deltasAfterAbort += 1;
          else controller.abort();
        },
        controller.signal,
      );
      await expect(pending).rejects.toMatchObject({ name: "AbortError" });
      expect(deltasAfterAbort).toBeLessThanOrEqual(1);
      const after = await chat(userChat(model.prompt, { maxTokens: 4 }));
      expect(after.result.usage.completionTokens).toBeGreaterThan(0);
    });

    it("runs more jobs than maxConcurrency; the extra ones wait for a slot", async () => {
      const jobs = await Promise.all([1, 2, 3, 4, 5].map((seed) => chat(userChat(model.prompt, { temperature: 1, seed, maxTokens: 16 }))));
      for (const job of jobs) {
        expect(["stop", "length"]).toContain(job.result.finishReason);
        expect(job.result.usage.completionTokens).toBeGreaterThan(0);
      }
    });

    it("rejects a prompt longer than the context as an invalid request on messages", async () => {
      const long = `${model.prompt} `.repeat(Math.ceil((model.contextSize * 4) / model.prompt.length));
      await expect(chat(userChat(long))).rejects.toMatchObject({ name: "EngineError", kind: "invalid_request", param: "messages" });
      await expect(chat(userChat(long))).rejects.toBeInstanceOf(EngineError);
    });

    it("continues a reply already begun (what a worker that died delivered) as the same reply, counting the prompt once", async () => {
      const request = userChat(model.prompt, { maxTokens: 24 });
      const full = await chat({ ...request, logprobs: true });
      const half = full.deltas.slice(0, Math.max(1, Math.floor(full.deltas.length / 2)));
      const begun = half.map((delta) => delta.content ?? "").join("");
      const sampled = half.reduce((n, delta) => n + (delta.logprobs?.length ?? 0), 0);
      const continued = await collectChat(engine, { ...request, maxTokens: 24 - sampled }, undefined, { continueFrom: begun });
      expect(continued.result.usage.promptTokens).toBe(full.result.usage.promptTokens);
      expect(continued.result.usage.completionTokens).toBeGreaterThan(0);
      expect(continued.result.usage.completionTokens).toBeLessThanOrEqual(24 - sampled);
      // Greedy decoding from the same tokens gives the rest of the same reply (when the begun text
      // tokenizes back into the tokens that were sampled, which a different split of it would not).
      if ((await engine.countTokens(begun)) === sampled) {
        expect(begun + continued.text).toBe(full.text);
        expect(continued.result.finishReason).toBe(full.result.finishReason);
      }
    });

    it("reports capabilities: chat, completions, embeddings, tools, json_schema, logprobs; no reasoning for a ChatML model", () => {
      expect(engine.capabilities()).toEqual({
        chat: true,
        completions: true,
        embeddings: true,
        tools: true,
        json_schema: true,
        logprobs: true,
        reasoning: false,
        continuation: true,
        grammarContinuation: true,
        contextLength: model.contextSize,
      });
    });
  });
}
