import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";

const THINKING = ["Let me ", "think."];
const ANSWER = ["The answer ", "is 42."];

/** A minimal OpenAI-compatible reasoning server (vLLM style reasoning_content deltas, usage at the end). */
function startReasoningServer(): Promise<{ server: Server; baseUrl: string; bodies: Record<string, unknown>[] }> {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      bodies.push(body);
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "up-1", object: "chat.completion.chunk", created: 1, model: "r1", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: "assistant", content: "" }));
      for (const piece of THINKING) res.write(chunk({ reasoning_content: piece }));
      for (const piece of ANSWER) res.write(chunk({ content: piece }));
      res.write(chunk({}, "stop"));
      res.write(
        `data: ${JSON.stringify({ id: "up-1", object: "chat.completion.chunk", created: 1, model: "r1", choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21, completion_tokens_details: { reasoning_tokens: 4 } } })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve({ server, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, bodies })),
  );
}

describe("a reasoning model served by an upstream engine, through the platform", () => {
  let upstream: Awaited<ReturnType<typeof startReasoningServer>>;
  let platform: TestPlatform;
  let openai: OpenAI;
  beforeAll(async () => {
    upstream = await startReasoningServer();
    platform = await startTestPlatform({
      models: () => [
        {
          id: "thinker",
          owned_by: "upstream-lab",
          engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "r1" },
          capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: true },
          context_length: 8192,
          pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
        },
      ],
    });
    openai = platform.openai((await platform.createKey()).key);
  });
  afterAll(async () => {
    await platform?.close();
    await new Promise((resolve) => upstream?.server.close(resolve));
  });

  it("returns the thinking as message.reasoning_content, counts it in the usage, and passes extended parameters through", async () => {
    const reply = await openai.chat.completions.create({
      model: "thinker",
      messages: [{ role: "user", content: "What is the answer?" }],
      reasoning_effort: "low",
      max_completion_tokens: 64,
      seed: 3,
    });
    const message = reply.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.content).toBe(ANSWER.join(""));
    expect(message.reasoning_content).toBe(THINKING.join(""));
    expect(reply.usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 9, total_tokens: 21, completion_tokens_details: { reasoning_tokens: 4 } });
    const sent = upstream.bodies.at(-1)!;
    expect(sent).toMatchObject({ model: "r1", reasoning_effort: "low", max_completion_tokens: 64, seed: 3, stream: true });
    const events = await completionEvents(platform.deps.pool, reply.id);
    expect(events[0]!.data).toMatchObject({ promptTokens: 12, completionTokens: 9, reasoningTokens: 4, costMicroChf: 30 });
  });

  it("streams reasoning_content deltas before the answer", async () => {
    const stream = await openai.chat.completions.create({ model: "thinker", messages: [{ role: "user", content: "Why?" }], stream: true });
    let reasoning = "";
    let content = "";
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
      reasoning += delta?.reasoning_content ?? "";
      content += delta?.content ?? "";
    }
    expect(reasoning).toBe(THINKING.join(""));
    expect(content).toBe(ANSWER.join(""));
  });
});
