import { describe, expect, it } from "vitest";
import { EngineError } from "../engines/engine.ts";
import { toJobError } from "./toJobError.ts";

describe("toJobError", () => {
  const overContext = new EngineError(
    "invalid_request",
    "This model's maximum context length is 512 tokens. However, you requested 600 tokens (590 in the messages, 10 in the completion). Please reduce the length of the messages or completion.",
    "messages",
    "context_length_exceeded",
  );

  it("names a text completion's prompt and a response's input as the endpoint calls them, in param and message", () => {
    expect(toJobError(overContext, "completions")).toEqual({
      kind: "invalid_request",
      message:
        "This model's maximum context length is 512 tokens. However, you requested 600 tokens (590 in the prompt, 10 in the completion). Please reduce the length of the prompt or completion.",
      param: "prompt",
      code: "context_length_exceeded",
    });
    const short = new EngineError(
      "invalid_request",
      "This model's maximum context length is 512 tokens, however your messages resulted in 600 tokens",
      "messages",
    );
    expect(toJobError(short, "responses")).toMatchObject({
      message: "This model's maximum context length is 512 tokens, however your input resulted in 600 tokens",
      param: "input",
    });
  });

  it("leaves chat's messages as they are, and says nothing of an internal failure", () => {
    expect(toJobError(overContext, "chat.completions")).toMatchObject({ message: overContext.message, param: "messages" });
    expect(toJobError(new EngineError("internal", "segfault at 0x0", null))).toEqual({
      kind: "internal",
      message: "The model failed while generating.",
      param: null,
    });
  });

  it("names a response's text.format where the engine named chat's response_format", () => {
    const refused = new EngineError("invalid_request", "Unsupported JSON schema: Failed to parse grammar", "response_format");
    expect(toJobError(refused, "responses").param).toBe("text.format");
    expect(toJobError(new EngineError("invalid_request", "x", "response_format.json_schema.schema"), "responses").param).toBe("text.format.schema");
    expect(toJobError(refused, "chat.completions").param).toBe("response_format");
  });
});
