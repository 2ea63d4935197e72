import { describe, expect, it } from "vitest";
import { assertPromptFits, maxPromptChars, textLengthUpTo } from "./promptLengthLimit.ts";

describe("textLengthUpTo", () => {
  it("counts strings and keys at any depth without recursion", () => {
    let deep: unknown = "abc";
    for (let i = 0; i < 100_000; i += 1) deep = { k: [deep] };
    expect(textLengthUpTo(deep, Number.MAX_SAFE_INTEGER)).toBe(100_003);
  });

  it("stops once past the limit", () => {
    expect(textLengthUpTo(["aaaa", "bbbb", "cccc"], 5)).toBeLessThanOrEqual(8);
  });
});

describe("assertPromptFits", () => {
  const chat = (content: string) => ({
    kind: "chat" as const,
    request: { messages: [{ role: "user" as const, content }], maxTokens: 1, temperature: 1, topP: 1, presencePenalty: 0, frequencyPenalty: 0 },
  });

  it("accepts up to 8 characters per context token and names the param beyond", () => {
    expect(maxPromptChars(1024)).toBe(8192);
    expect(() => assertPromptFits("chat.completions", chat("x".repeat(8000)), 1024)).not.toThrow();
    expect(() => assertPromptFits("completions", chat("x".repeat(8200)), 1024)).toThrow(
      expect.objectContaining({ param: "prompt", code: "context_length_exceeded" }),
    );
    expect(() => assertPromptFits("embeddings", { kind: "embeddings", input: ["a", "x".repeat(9000)] }, 1024)).toThrow(
      expect.objectContaining({ param: "input[1]" }),
    );
  });
});
