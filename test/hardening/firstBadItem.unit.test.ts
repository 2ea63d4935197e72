import { describe, expect, it } from "vitest";
import { parseWith } from "../../src/api/http/validate.ts";
import { ChatCompletionRequestSchema } from "../../src/api/inference/endpoints/chat/chatCompletionRequestSchema.ts";
import { ResponseRequestSchema } from "../../src/api/inference/endpoints/responses/responseRequestSchema.ts";

/** Request arrays are checked a group at a time (itemsInOrder): tens of thousands of bad items cost one group's issues. */
describe("a request with tens of thousands of bad array items", () => {
  it("names the first bad message or input item of a request with tens of thousands of bad ones, as before", () => {
    const messages = Array.from({ length: 30_000 }, () => ({ role: "user", content: 5 }));
    expect(() => parseWith(ChatCompletionRequestSchema, { model: "m", messages })).toThrow(
      /^Invalid 'messages\[0\]\.content': expected a string or an array of text parts/,
    );
    const input = Array.from({ length: 49_000 }, () => ({ type: "x" }));
    expect(() => parseWith(ResponseRequestSchema, { model: "m", input })).toThrow(/^Invalid 'input\[0\]': expected a message, function_call/);
    // The issues built are those of the first group only, not one per bad item.
    const chat = ChatCompletionRequestSchema.safeParse({ model: "m", messages });
    const responses = ResponseRequestSchema.safeParse({ model: "m", input });
    expect(chat.success || chat.error.issues.length).toBeLessThanOrEqual(256);
    expect(responses.success || responses.error.issues.length).toBeLessThanOrEqual(256);
    const parts = Array.from({ length: 20_000 }, () => ({ type: "text", text: 5 }));
    expect(() =>
      parseWith(ChatCompletionRequestSchema, { model: "m", messages: [{ role: "user", content: [{ type: "text", text: "ok" }, ...parts] }] }),
    ).toThrow(/^Invalid 'messages\[0\]\.content': expected a string or an array of text parts/);
  });
});
