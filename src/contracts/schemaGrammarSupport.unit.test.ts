import { describe, expect, it } from "vitest";
import { integerBounds, unenforcedKeyword } from "./schemaGrammarSupport.ts";

describe("unenforcedKeyword", () => {
  const object = (property: unknown) => ({ type: "object", properties: { v: property }, required: ["v"], additionalProperties: false });

  it.each([
    [object({ type: "string", format: "email", pattern: "^.+@.+$" })],
    [object({ type: "integer", minimum: 0, maximum: 120 })],
    [object({ type: "string", minLength: 2, maxLength: 2 })],
    [object({ anyOf: [{ type: "string", format: "uuid" }, { type: "null" }] })],
    [{ $defs: { a: { type: "string", maxLength: 3 } }, type: "array", items: { $ref: "#/$defs/a" }, minItems: 1, title: "x" }],
  ])("accepts what the grammar enforces: %j", (schema) => {
    expect(unenforcedKeyword(schema, true)).toBeNull();
  });

  it.each([
    [object({ type: "string", pattern: "^a$" }), /"pattern" at the schema.properties.v/],
    [object({ type: "integer", multipleOf: 2 }), /"multipleOf"/],
    [object({ type: "string", format: "regex" }), /"format": "regex"/],
    [object({ oneOf: [{ type: "string" }] }), /"oneOf"/],
    [object({ type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 }), /no integer/],
    [{ type: "object", properties: {}, required: ["gone"] }, /"required" names "gone"/],
    [{ type: "array", items: { not: { type: "string" } } }, /"not" at the schema.items/],
    [{ type: "string", minLength: 5, maxLength: 2 }, /"minLength" is above "maxLength" at the schema: no string fits/],
    [object({ type: "array", items: { type: "integer" }, minItems: 4, maxItems: 2 }), /"minItems" is above "maxItems" at the schema.properties.v/],
  ])("names what it does not: %j", (schema, message) => {
    expect(unenforcedKeyword(schema, true)).toMatch(message);
  });

  it("a tool node-llama-cpp may call with tool_choice auto: no bounds and only its date formats", () => {
    expect(unenforcedKeyword(object({ type: "integer", maximum: 3 }), false)).toMatch(/"maximum"/);
    expect(unenforcedKeyword(object({ type: "string", format: "email" }), false)).toMatch(/"format"/);
    expect(unenforcedKeyword(object({ type: "string", format: "date-time" }), false)).toBeNull();
  });
});

describe("integerBounds", () => {
  it("turns bounds into the integers they allow, cut to 15 digits", () => {
    expect(integerBounds({ minimum: 0.5, exclusiveMaximum: 10 })).toEqual({ low: 1, high: 9, empty: false });
    expect(integerBounds({ maximum: 120, minimum: -(2 ** 53) })).toEqual({ low: -999_999_999_999_999, high: 120, empty: false });
    expect(integerBounds({ type: "integer" })).toBeNull();
  });
});
