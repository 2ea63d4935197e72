import { describe, expect, it } from "vitest";
import { chatPromptTokensUpperBound, promptTokensUpperBound, TOOLS_TEMPLATE_TOKENS } from "./promptTokensUpperBound.ts";

describe("promptTokensUpperBound", () => {
  it("counts UTF-8 bytes of each part plus template markers", () => {
    expect(promptTokensUpperBound(["hello"], 10_000)).toBe(5 + 8 + 32);
    expect(promptTokensUpperBound(["é", "日本"], 10_000)).toBe(2 + 8 + 6 + 8 + 32);
    expect(promptTokensUpperBound([{ type: "function", function: { name: "f" } }], 10_000)).toBe(
      Buffer.byteLength(JSON.stringify({ type: "function", function: { name: "f" } })) + 8 + 32,
    );
  });

  it("never exceeds the model's context length", () => {
    expect(promptTokensUpperBound(["x".repeat(100_000)], 4096)).toBe(4096);
  });

  it("adds the template's tool instructions once to a chat request that offers tools, within the context length", () => {
    const plain = { messages: [{ role: "user", content: "Hi" }], maxTokens: 5 };
    const tools = [{ type: "function", function: { name: "f" } }];
    expect(chatPromptTokensUpperBound(plain, 100_000)).toBe(promptTokensUpperBound([plain], 100_000));
    expect(chatPromptTokensUpperBound({ ...plain, tools: [] }, 100_000)).toBe(promptTokensUpperBound([{ ...plain, tools: [] }], 100_000));
    expect(chatPromptTokensUpperBound({ ...plain, tools }, 100_000)).toBe(promptTokensUpperBound([{ ...plain, tools }], 100_000) + TOOLS_TEMPLATE_TOKENS);
    expect(chatPromptTokensUpperBound({ ...plain, tools }, 512)).toBe(512);
  });
});
