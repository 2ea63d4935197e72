import { describe, expect, it } from "vitest";
import { engineErrorFromResponse } from "./engineErrorFromResponse.ts";

describe("engineErrorFromResponse", () => {
  it("names a prompt over the context context_length_exceeded, in vLLM's and llama.cpp server's words", () => {
    const vllm = engineErrorFromResponse(
      400,
      JSON.stringify({
        object: "error",
        message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
        type: "BadRequestError",
        param: null,
        code: 400,
      }),
    );
    expect(vllm).toMatchObject({ kind: "invalid_request", code: "context_length_exceeded" });
    const llamaServer = engineErrorFromResponse(
      400,
      JSON.stringify({ error: { code: 400, message: "the request exceeds the available context size", type: "exceed_context_size_error" } }),
    );
    expect(llamaServer).toMatchObject({ kind: "invalid_request", code: "context_length_exceeded" });
  });

  it("keeps other refusals without a code, with the upstream's message and parameter", () => {
    const error = engineErrorFromResponse(422, JSON.stringify({ error: { message: "temperature must be at most 2", param: "temperature" } }));
    expect(error).toMatchObject({ kind: "invalid_request", code: null, param: "temperature", message: "temperature must be at most 2" });
    expect(engineErrorFromResponse(503, "busy")).toMatchObject({ kind: "unavailable", code: null });
  });
});
