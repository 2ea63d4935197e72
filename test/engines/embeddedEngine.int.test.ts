import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTinyModel } from "../../tools/gguf/tinyModel.ts";
import type { Llama } from "node-llama-cpp";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import { resolveThreads } from "../../workers/engines/embedded/embeddedEngineOptions.ts";
import { collectChat, userChat } from "../support/engines/engineTestKit.ts";

let directory: string;
let modelPath: string;
let llama: Llama;

beforeAll(async () => {
  llama = await createLlama({ gpu: false });
  directory = await mkdtemp(join(tmpdir(), "tiny-model-"));
  modelPath = (await writeTinyModel(join(directory, "tiny.gguf"))).path;
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("EmbeddedEngine options", () => {
  it("defaults threads to half the cores and never uses more threads than cores", () => {
    expect(resolveThreads({ cores: 2 })).toBe(1);
    expect(resolveThreads({ cores: 16 })).toBe(8);
    expect(resolveThreads({ cores: 1 })).toBe(1);
    expect(resolveThreads({ cores: 2, threads: 8 })).toBe(2);
    expect(resolveThreads({ cores: 8, threads: 3 })).toBe(3);
  });

  it("serves only the capabilities the registry enables", async () => {
    const engine = await EmbeddedEngine.load(
      { modelPath, threads: 1, contextSize: 1024, capabilities: { tools: false, embeddings: false, logprobs: false } },
      { llama },
    );
    try {
      expect(engine.capabilities()).toMatchObject({ chat: true, tools: false, embeddings: false, logprobs: false, json_schema: true });
      const tools = [{ type: "function" as const, function: { name: "f" } }];
      await expect(collectChat(engine, userChat("Hi", { tools }))).rejects.toMatchObject({ kind: "invalid_request", param: "tools" });
      await expect(collectChat(engine, userChat("Hi", { logprobs: true }))).rejects.toMatchObject({ kind: "invalid_request", param: "logprobs" });
      await expect(engine.embed(["x"], new AbortController().signal)).rejects.toMatchObject({ kind: "invalid_request", param: "model" });
      // tool_choice none means the tools are not used at all.
      const out = await collectChat(engine, userChat("Hi", { tools, toolChoice: "none", maxTokens: 4 }));
      expect(out.result.usage.completionTokens).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });

  it("rejects a missing model file as unavailable", async () => {
    await expect(EmbeddedEngine.load({ modelPath: join(directory, "missing.gguf"), threads: 1 }, { llama })).rejects.toMatchObject({ kind: "unavailable" });
  });

  it("rejects calls after close", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 256 }, { llama });
    await engine.close();
    await expect(engine.countTokens("x")).rejects.toMatchObject({ kind: "unavailable" });
  });
});

describe("EmbeddedEngine concurrency", () => {
  it("queues jobs beyond maxConcurrency; an aborted waiting job leaves the others running", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 512, maxConcurrency: 1 }, { llama });
    try {
      const controller = new AbortController();
      let waiting: Promise<unknown> | null = null;
      let waitingOutcome: Promise<unknown> | null = null;
      let third: Promise<unknown> | null = null;
      // Once the first job streams, it holds the only slot: the next two jobs wait.
      const first = engine.chat(
        userChat("Hello there", { maxTokens: 24, temperature: 1, seed: 1 }),
        () => {
          if (waiting !== null) return;
          waiting = collectChat(engine, userChat("Hello there", { maxTokens: 24 }), controller.signal);
          waitingOutcome = waiting.then(
            () => "resolved",
            (error: unknown) => error,
          );
          third = collectChat(engine, userChat("Hello there", { maxTokens: 24, temperature: 1, seed: 3 }));
          setImmediate(() => controller.abort());
        },
        new AbortController().signal,
      );
      expect((await first).usage.completionTokens).toBeGreaterThan(0);
      expect(waiting).not.toBeNull();
      expect(await waitingOutcome).toMatchObject({ name: "AbortError" });
      expect(await third).toMatchObject({ result: { usage: { promptTokens: 18 } } });
    } finally {
      await engine.close();
    }
  });
});

describe("EmbeddedEngine on the tiny model's designed reply", () => {
  it("ends the greedy reply with end-of-generation: finish stop, the eog token counted", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 512 }, { llama });
    try {
      expect(engine.chatWrapper.wrapperName).toBe("ChatML");
      const out = await collectChat(engine, userChat("Hello there", { logprobs: true, maxTokens: 64 }));
      expect(out.result.finishReason).toBe("stop");
      expect(out.text.length).toBeGreaterThan(0);
      expect(out.result.usage.completionTokens).toBe(out.logprobs.length + 1);
    } finally {
      await engine.close();
    }
  });
});

describe("EmbeddedEngine continuing a reply already begun", () => {
  it("continues the delivered text as the same model response, after the prompt, an assistant prefill or nothing else", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 512 }, { llama });
    try {
      const request = userChat("Hello there", { maxTokens: 64 });
      const full = await collectChat(engine, request);
      expect(full.text).toBe("Hello! I am a tiny test model.");
      const continued = await collectChat(engine, request, undefined, { continueFrom: "Hello! I am" });
      expect(continued.text).toBe(" a tiny test model.");
      expect(continued.result.finishReason).toBe("stop");
      // Usage: the request's prompt (without the continued text) and the new tokens only.
      expect(continued.result.usage.promptTokens).toBe(full.result.usage.promptTokens);
      expect((await engine.countTokens("Hello! I am")) + continued.result.usage.completionTokens).toBe(full.result.usage.completionTokens);
      // The client's own assistant prefill is the start of the same response: the text follows it.
      const prefilled = { ...request, messages: [...request.messages, { role: "assistant" as const, content: "Hello!" }] };
      expect((await collectChat(engine, prefilled)).text).toBe(" I am a tiny test model.");
      expect((await collectChat(engine, prefilled, undefined, { continueFrom: " I am a" })).text).toBe(" tiny test model.");
    } finally {
      await engine.close();
    }
  });

  it("continues a reply under a grammar (response format) where the grammar stands; refuses one with tool_choice auto", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 512 }, { llama });
    try {
      const json = userChat("Hi", { responseFormat: { type: "json_object" }, maxTokens: 8 });
      // After "{" the JSON grammar allows a key or the end of the object, never a second "{".
      expect((await collectChat(engine, json, undefined, { continueFrom: "{" })).text).toMatch(/^\s*["}]/);
      const tools = userChat("Hi", { tools: [{ type: "function", function: { name: "f" } }] });
      await expect(collectChat(engine, tools, undefined, { continueFrom: "x" })).rejects.toMatchObject({ name: "EngineError", kind: "internal" });
    } finally {
      await engine.close();
    }
  });
});

describe("EmbeddedEngine sampling", () => {
  it("applies presence and frequency penalties (a negative penalty makes the reply repeat itself)", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 512 }, { llama });
    try {
      const request = userChat("Tell me more and more", { temperature: 0.8, seed: 11, maxTokens: 40 });
      const plain = await collectChat(engine, request);
      const repeated = await collectChat(engine, { ...request, presencePenalty: -1.5, frequencyPenalty: -1.5 });
      expect(repeated.text).not.toBe(plain.text);
      expect(repeated.result.usage.completionTokens).toBeGreaterThan(plain.result.usage.completionTokens);
    } finally {
      await engine.close();
    }
  });

  it("stops at the end of the context with finish_reason length", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 64 }, { llama });
    try {
      const contextLength = engine.capabilities().contextLength; // llama.cpp may round the requested size up
      let content = "Hello";
      while ((await engine.countChatTokens([{ role: "user", content: `${content} there` }])) < contextLength - 4) content += " there";
      const messages = [{ role: "user" as const, content }];
      const prompt = await engine.countChatTokens(messages);
      const out = await collectChat(engine, { ...userChat("", { maxTokens: 1000 }), messages });
      expect(out.result.finishReason).toBe("length");
      expect(out.result.usage.promptTokens).toBe(prompt);
      expect(out.result.usage.completionTokens).toBe(contextLength - prompt);
      expect(contextLength - prompt).toBeLessThan(8);
    } finally {
      await engine.close();
    }
  });

  it("lets a stop sequence cut JSON-mode output short without a validation error", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 512 }, { llama });
    try {
      const schema = { type: "object", properties: { colour: { enum: ["red", "green"] } } };
      const out = await collectChat(engine, userChat("Hi", { responseFormat: { type: "json_schema", json_schema: { name: "a", schema } }, stop: ["col"] }));
      expect(out.result.finishReason).toBe("stop");
      expect(out.text.startsWith("{")).toBe(true);
      expect(out.text).not.toContain("col");
    } finally {
      await engine.close();
    }
  });
});

describe("EmbeddedEngine reasoning", () => {
  // The tiny model never writes <think> itself; Qwen 3.5's wrapper opens the thought when the response starts.
  const qwen = { type: "qwen", settings: { variation: "3.5" } };

  it("reports reasoning for templates with thought segments and streams thoughts apart from the answer, within the effort's budget", async () => {
    const engine = await EmbeddedEngine.load(
      { modelPath, threads: 1, contextSize: 1024, chatWrapper: qwen, reasoningBudgets: { low: 6, medium: 12, high: 24 } },
      { llama },
    );
    try {
      expect(engine.capabilities().reasoning).toBe(true);
      const low = await collectChat(engine, userChat("Hello there", { maxTokens: 48, reasoningEffort: "low", logprobs: true }));
      expect(low.reasoning.length).toBeGreaterThan(0);
      expect(low.result.usage.reasoningTokens).toBe(6);
      // Sampled tokens: thoughts, the answer's tokens, and the end-of-generation token when it ended by itself.
      const eog = low.result.finishReason === "stop" ? 1 : 0;
      expect(low.result.usage.completionTokens).toBe(low.result.usage.reasoningTokens + low.logprobs.length + eog);
      const high = await collectChat(engine, userChat("Hello there", { maxTokens: 48, reasoningEffort: "high" }));
      expect(high.result.usage.reasoningTokens).toBeGreaterThan(6);
      expect(high.result.usage.reasoningTokens).toBeLessThanOrEqual(24);
      expect(high.deltas.every((delta) => delta.content === undefined || delta.reasoning === undefined)).toBe(true);
    } finally {
      await engine.close();
    }
  });

  it("reports no reasoning when the registry disables it", async () => {
    const engine = await EmbeddedEngine.load({ modelPath, threads: 1, contextSize: 1024, chatWrapper: qwen, capabilities: { reasoning: false } }, { llama });
    try {
      expect(engine.capabilities().reasoning).toBe(false);
      const out = await collectChat(engine, userChat("Hello there", { maxTokens: 24, reasoningEffort: "high" }));
      expect(out.result.usage.reasoningTokens).toBeLessThanOrEqual(1);
    } finally {
      await engine.close();
    }
  });
});
