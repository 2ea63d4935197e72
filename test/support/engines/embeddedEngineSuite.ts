import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineError } from "../../../workers/engines/engine.ts";
import type { ChatRequest, ToolDefinition } from "../../../workers/engines/engine.ts";
import { createLlama } from "../../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../../workers/engines/embedded/embeddedEngine.ts";
import { describeEngineConformance } from "./engineConformance.ts";
import { collectChat, userChat } from "./engineTestKit.ts";

/** What the embedded engine declares for a model without thought segments when the registry disables nothing. */
export const EMBEDDED_DEFAULTS = {
  chat: true,
  completions: true,
  embeddings: true,
  tools: true,
  json_schema: true,
  logprobs: true,
  reasoning: false,
  continuation: true,
};

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

/**
 * The checks every model on the embedded engine must pass: the engine conformance suite every adapter
 * passes (engineConformance.ts), then what is particular to this engine (exact token counts from the
 * model's own tokenizer and chat template, seeds, logprobs of greedy decoding, its sequences). Properties,
 * not exact strings (outputs vary with the thread count).
 */
export function embeddedEngineSuite(name: string, setup: () => Promise<SuiteModel>): void {
  describeEngineConformance(`EmbeddedEngine on ${name}`, EMBEDDED_DEFAULTS, async () => {
    const model = await setup();
    const llama = await createLlama({ gpu: false });
    const engine = await EmbeddedEngine.load({ modelPath: model.modelPath, threads: 1, maxConcurrency: 2, contextSize: model.contextSize }, { llama });
    return { engine, prompt: model.prompt };
  });

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

    it("delivers at max tokens the text it held back as the possible start of a stop sequence", async () => {
      const base = await chat(userChat(model.prompt, { logprobs: true, maxTokens: 6 }));
      expect(base.result.finishReason).toBe("length");
      const tail = base.logprobs
        .slice(-2)
        .map((entry) => entry.token)
        .join("");
      expect(tail).not.toContain("\uFFFD");
      // A stop sequence whose start is the reply's last two tokens and whose rest never comes.
      const held = await chat(userChat(model.prompt, { logprobs: true, maxTokens: 6, stop: [`${tail}\u0001never`] }));
      expect(held.result.finishReason).toBe("length");
      expect(held.text).toBe(base.text);
      expect(held.logprobs.map((entry) => entry.token)).toEqual(base.logprobs.map((entry) => entry.token));
      // Every counted token went out with a delta (what is charged was delivered).
      expect(held.deltas.reduce((sum, delta) => sum + (delta.tokens ?? 0), 0)).toBe(held.result.usage.completionTokens);
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
