import { describe, expect, it } from "vitest";
import { parseRequiredCalls, partialRequiredCalls } from "./forcedToolCall.ts";

describe("partialRequiredCalls", () => {
  it("returns a call cut inside its arguments with the arguments written so far", () => {
    expect(partialRequiredCalls('{"name": "note", "arguments": {"text": "Hel', false)).toEqual([{ name: "note", arguments: '{"text": "Hel' }]);
  });

  it("returns finished calls whole and the cut one as far as written (parallel), skipping a call without a name yet", () => {
    const text = '[{"name":"a","arguments":{"x":"}{[\\""}}, {"name": "b", "arguments": {"y": [1, 2';
    expect(partialRequiredCalls(text, true)).toEqual([
      { name: "a", arguments: '{"x":"}{[\\""}' },
      { name: "b", arguments: '{"y": [1, 2' },
    ]);
    expect(partialRequiredCalls('[{"name":"a","arguments":{}}, {"na', true)).toEqual([{ name: "a", arguments: "{}" }]);
  });

  it("nothing before a name is written", () => {
    expect(partialRequiredCalls('{"nam', false)).toEqual([]);
  });

  it("parseRequiredCalls never throws on text that is not whole JSON", () => {
    expect(parseRequiredCalls('{"name": "f", "arguments": {"a": 1', false)).toEqual([{ name: "f", arguments: '{"a": 1' }]);
  });
});
