import { describe, expect, it } from "vitest";
import { ModelRegistry } from "../../../../models/modelRegistry.ts";
import type { ModelEntry } from "../../../../models/modelRegistrySchema.ts";
import { jobHoldMicroChf } from "../../admission/jobHoldMicroChf.ts";
import { ChatCompletionRequestSchema } from "./chatCompletionRequestSchema.ts";
import { toEngineChatRequest } from "./toEngineChatRequest.ts";

const capabilities = { chat: true, completions: false, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: true };
const base = { owned_by: "lab", context_length: 8192, capabilities, pricing: { input_per_million_chf: 1, output_per_million_chf: 2 } };
const registry = new ModelRegistry("t", [
  { ...base, id: "up", engine: { type: "upstream", baseUrl: "http://127.0.0.1:1/v1", model: "r1" } },
  { ...base, id: "local", engine: { type: "embedded", path: "x.gguf" } },
] satisfies ModelEntry[]);

const request = (model: string, extra: Record<string, unknown> = {}) =>
  toEngineChatRequest(ChatCompletionRequestSchema.parse({ model, messages: [{ role: "user", content: "Hi" }], ...extra }), registry.get(model)!);

describe("toEngineChatRequest: the token bound", () => {
  it("leaves an upstream reasoning model's bound to its backend, holding money for the whole context", () => {
    const engine = request("up");
    expect(engine).toMatchObject({ maxTokens: 8192, maxTokensDefault: true });
    expect(jobHoldMicroChf({ kind: "chat", request: engine }, registry.get("up")!)).toBeGreaterThanOrEqual(8192 * 2);
  });

  it("keeps a client's bound, and the spec's default of 150 for other models", () => {
    expect(request("up", { max_completion_tokens: 99 })).toMatchObject({ maxTokens: 99 });
    expect(request("up", { max_completion_tokens: 99 })).not.toHaveProperty("maxTokensDefault");
    expect(request("local")).toMatchObject({ maxTokens: 150 });
    expect(request("local")).not.toHaveProperty("maxTokensDefault");
  });
});
