import { describe, expect, it } from "vitest";
import { JsonSchemaCompiler, jsonSchemaProblem } from "./jsonSchemaProblem.ts";

describe("jsonSchemaProblem", () => {
  const compiler = new JsonSchemaCompiler();

  it.each([
    [{ type: "nonsense" }, /not a valid JSON Schema/],
    [{ required: "a" }, /not a valid JSON Schema/],
    [{ properties: { a: { $ref: "#/$defs/none" } } }, /can't resolve reference/],
    [{ type: "string", minLength: -1 }, /not a valid JSON Schema/],
    [{ type: "string", pattern: "(" }, /not a valid JSON Schema|Invalid regular expression/],
    [{ enum: [] }, /enum/],
    [{ type: "object", properties: { a: { not: true } }, required: ["a"] }, /required/],
    [{ not: {} }, /matches everything/],
    [{ anyOf: [{ not: {} }, false] }, /no branch/],
    [{ type: "array", items: false, minItems: 1 }, /minItems/],
  ])("refuses %j", (schema, message) => {
    expect(jsonSchemaProblem(schema, compiler)).toMatch(message);
  });

  it.each([
    [{ type: "object", properties: { child: { $ref: "#" } } }],
    [
      {
        $schema: "http://json-schema.org/draft-07/schema#",
        type: "object",
        definitions: { a: { type: "string" } },
        properties: { a: { $ref: "#/definitions/a" } },
      },
    ],
    [{ type: "string", format: "email", "x-vendor": true }],
    [{ type: "array", items: false }],
    [{ not: { type: "string" } }],
  ])("accepts %j", (schema) => {
    expect(jsonSchemaProblem(schema, compiler)).toBeNull();
  });

  it("keeps no schema of an earlier request: the same $id twice, and a root $ref resolving to its own request", () => {
    const withId = { $id: "https://example.test/a", type: "object", properties: { b: { $id: "https://example.test/b", type: "string" } } };
    expect(jsonSchemaProblem(withId, compiler)).toBeNull();
    expect(jsonSchemaProblem(structuredClone(withId), compiler)).toBeNull();
    expect(jsonSchemaProblem({ $ref: "https://example.test/b" }, compiler)).toMatch(/can't resolve reference/);
  });
});
