import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, tinyModelEntries, type TestPlatform } from "../support/testPlatform.ts";

const SHORT_EMBED = "tiny-embed-short";

describe("the model catalogue and embedding dimensions (real HTTP API, tiny model)", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      models: (file) => {
        const entries = tinyModelEntries(file);
        const embed = entries.find((entry) => entry.id === TINY_EMBED)!;
        return [...entries, { ...embed, id: SHORT_EMBED, embedding_dimensions: 64, truncatable_embeddings: true }];
      },
    });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const get = (path: string) => platform.request("GET", path, { token: key });
  const embed = (body: Record<string, unknown>) => platform.request("POST", "/v1/embeddings", { token: key, body: { input: "Hello there", ...body } });

  it("lists each model in OpenAI's shape plus context length, CHF prices, capabilities and supported parameters", async () => {
    const list = await get("/v1/models");
    expect(list.status).toBe(200);
    const chat = list.body.data.find((model: { id: string }) => model.id === TINY_CHAT);
    expect(chat).toMatchObject({
      id: TINY_CHAT,
      object: "model",
      created: 1735689600,
      owned_by: "inference-platform",
      context_length: 1024,
      pricing: { currency: "CHF", input_chf_per_million_tokens: 0.5, output_chf_per_million_tokens: 1.5 },
      capabilities: { chat: true, completions: true, embeddings: false, tools: true, json_schema: true, logprobs: true, reasoning: false },
    });
    // Chat's parameters, then those of the Responses API (which chat models serve), per capability; then
    // the model's backend-specific ones.
    expect(chat.supported_parameters).toEqual([
      ...["max_tokens", "temperature", "top_p", "stream", "stream_options", "stop", "presence_penalty", "frequency_penalty", "seed", "user"],
      ...["logit_bias", "max_completion_tokens", "instructions", "max_output_tokens", "previous_response_id", "store", "background"],
      ...["tools", "tool_choice", "parallel_tool_calls", "response_format", "text", "logprobs", "top_logprobs", "include"],
      ...["top_k", "min_p", "repetition_penalty"],
    ]);
    expect(chat.supported_parameters).not.toContain("reasoning_effort");
    expect(chat.supported_parameters).not.toContain("reasoning");
    expect(chat).not.toHaveProperty("reasoning_efforts");
    const one = await get(`/v1/models/${SHORT_EMBED}`);
    expect(one.body).toMatchObject({ id: SHORT_EMBED, object: "model", embedding_dimensions: 64, capabilities: { embeddings: true, chat: false } });
    expect(one.body.supported_parameters).toEqual(["encoding_format", "dimensions", "user"]);
    expect((await get(`/v1/models/${TINY_EMBED}`)).body.supported_parameters).toEqual(["encoding_format", "user"]);
  });

  it("shortens embeddings to `dimensions` and renormalises them, where the model allows it", async () => {
    const full = await embed({ model: SHORT_EMBED });
    const short = await embed({ model: SHORT_EMBED, dimensions: 16 });
    expect(short.status).toBe(200);
    const vector = short.body.data[0].embedding as number[];
    expect(vector).toHaveLength(16);
    expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    const prefix = (full.body.data[0].embedding as number[]).slice(0, 16);
    const norm = Math.hypot(...prefix);
    for (const [index, value] of vector.entries()) expect(value).toBeCloseTo(prefix[index]! / norm, 5);
  });

  it.each([
    [TINY_EMBED, 16, "unsupported_parameter"],
    [SHORT_EMBED, 65, "invalid_value"],
    [SHORT_EMBED, 0, "invalid_value"],
  ])("%s with dimensions %d is a 400 naming dimensions (%s)", async (model, dimensions, code) => {
    const response = await embed({ model, dimensions });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param: "dimensions", code });
  });
});
