import { readFile } from "node:fs/promises";
import path from "node:path";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_MODELS_CONFIG } from "../../src/config/config.ts";
import type { ModelEntry, RegistryFile } from "../../src/models/modelRegistrySchema.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";

/** The shipped registry (models/registry.json) with its built-in austen model, run with one thread. */
async function shippedModels(): Promise<ModelEntry[]> {
  const file = JSON.parse(await readFile(DEFAULT_MODELS_CONFIG, "utf8")) as RegistryFile;
  const dir = path.dirname(DEFAULT_MODELS_CONFIG);
  return file.models.map((m) => (m.engine.type === "embedded" ? { ...m, engine: { ...m.engine, path: path.resolve(dir, m.engine.path), threads: 1 } } : m));
}

describe("the built-in austen model through the platform (openai SDK)", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let chatModel: string;
  let embedModel: string;
  beforeAll(async () => {
    const models = await shippedModels();
    chatModel = models.find((m) => m.capabilities.chat)!.id;
    embedModel = models.find((m) => m.capabilities.embeddings)!.id;
    platform = await startTestPlatform({ models: () => models });
    openai = platform.openai((await platform.createKey()).key);
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("lists the built-in chat and embeddings models", async () => {
    const ids = (await openai.models.list()).data.map((m) => m.id);
    expect(ids).toContain(chatModel);
    expect(ids).toContain(embedModel);
  });

  it("chats, streamed and not, with the same reply for the same seed", async () => {
    const params = { model: chatModel, messages: [{ role: "user" as const, content: "Who is Mr. Darcy?" }], seed: 21, max_tokens: 40 };
    const reply = await openai.chat.completions.create(params);
    const content = reply.choices[0]!.message.content!;
    expect(content.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(reply.choices[0]!.finish_reason);
    expect(reply.usage!.completion_tokens).toBeGreaterThan(0);
    expect(reply.usage!.completion_tokens).toBeLessThanOrEqual(40);
    const stream = await openai.chat.completions.create({ ...params, stream: true });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";
    expect(streamed).toBe(content);
    const events = await completionEvents(platform.deps.pool, reply.id);
    expect(events[0]!.data.completionTokens).toBe(reply.usage!.completion_tokens);
    expect(events[0]!.data.model).toBe(chatModel);
  });

  it("completes a text prompt (default max_tokens 16)", async () => {
    const reply = await openai.completions.create({ model: chatModel, prompt: "It is a truth universally acknowledged", seed: 4 });
    expect(reply.object).toBe("text_completion");
    expect(reply.choices[0]!.text.length).toBeGreaterThan(0);
    expect(reply.usage!.completion_tokens).toBeLessThanOrEqual(16);
  });

  it("embeds text", async () => {
    const result = await openai.embeddings.create({ model: embedModel, input: ["Pride and Prejudice", "Sense and Sensibility"], encoding_format: "float" });
    expect(result.data).toHaveLength(2);
    expect(result.data[0]!.embedding.length).toBeGreaterThan(0);
    expect(result.data[0]!.embedding.length).toBe(result.data[1]!.embedding.length);
    expect(result.usage.prompt_tokens).toBeGreaterThan(0);
  });
});
