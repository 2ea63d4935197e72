import { describe, expect, it } from "vitest";
import { EngineError } from "../engine.ts";
import { toChatFunctions, toChatHistory } from "./toChatHistory.ts";
import { toGbnfSchema } from "./toGbnfSchema.ts";

describe("toChatHistory", () => {
  it("maps roles and ends with the model response to generate", () => {
    expect(
      toChatHistory([
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
      ]),
    ).toEqual([
      { type: "system", text: "Be brief." },
      { type: "user", text: "Hi" },
      { type: "model", response: [] },
    ]);
  });

  it("attaches tool results to the assistant's function calls; the model continues that response", () => {
    const history = toChatHistory([
      { role: "user", content: "Weather?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Bern"}' } }] },
      { role: "tool", content: '{"celsius":21}', tool_call_id: "call_1" },
    ]);
    expect(history[1]).toEqual({
      type: "model",
      response: [{ type: "functionCall", name: "get_weather", params: { city: "Bern" }, result: { celsius: 21 } }],
    });
    expect(history).toHaveLength(2);
  });

  it("keeps a call's arguments as text when they are not JSON (a call cut short by the output cap)", () => {
    const history = toChatHistory([
      { role: "user", content: "Weather?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Be' } }] },
      { role: "tool", content: "unknown", tool_call_id: "call_1" },
    ]);
    expect(history[1]).toEqual({
      type: "model",
      response: [{ type: "functionCall", name: "get_weather", params: '{"city":"Be', result: "unknown" }],
    });
  });

  it("rejects a tool message that answers no earlier call", () => {
    const convert = () =>
      toChatHistory([
        { role: "user", content: "hi" },
        { role: "tool", content: "x", tool_call_id: "call_x" },
      ]);
    expect(convert).toThrow(EngineError);
    // Named by its place, as the API names a bad field.
    expect(convert).toThrow(expect.objectContaining({ kind: "invalid_request", param: "messages[1].tool_call_id" }));
  });

  it("turns tools into functions with grammar-ready parameter schemas", () => {
    const functions = toChatFunctions([
      {
        type: "function",
        function: {
          name: "f",
          description: "d",
          parameters: { type: "object", title: "T", properties: { a: { anyOf: [{ type: "string" }, { type: "null" }] } } },
        },
      },
      { type: "function", function: { name: "g" } },
    ]);
    expect(functions).toEqual({
      f: { description: "d", params: { type: "object", properties: { a: { oneOf: [{ type: "string" }, { type: "null" }] } } } },
      g: { params: { type: "object", properties: {} } },
    });
  });

  it("maps definitions references to $defs", () => {
    expect(toGbnfSchema({ definitions: { x: { type: "string" } }, $ref: "#/definitions/x" }, "response_format")).toEqual({
      $defs: { x: { type: "string" } },
      $ref: "#/$defs/x",
    });
  });
});
