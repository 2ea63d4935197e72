import { describe, expect, it } from "vitest";
import { JsonSchemaValidator, jsonSchemaProblem } from "./jsonSchemaProblem.ts";

describe("jsonSchemaProblem", () => {
  const compiler = new JsonSchemaValidator();

  it.each([
    [{ type: "nonsense" }, /not a valid JSON Schema/],
    [{ required: "a" }, /not a valid JSON Schema/],
    [{ properties: { a: { $ref: "#/$defs/none" } } }, /points to nothing/],
    [{ type: "string", minLength: -1 }, /not a valid JSON Schema/],
    [{ $ref: "https://example.test/schema.json" }, /points outside/],
    [{ $ref: "#/$defs/a~1b" }, /points to nothing/],
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
    [{ $defs: { "a/b": { type: "string" } }, $ref: "#/$defs/a~1b" }],
    [{ $defs: { n: { $anchor: "name", type: "string" } }, properties: { x: { $ref: "#name" } } }],
    [{ const: { $ref: "#/nowhere" } }],
  ])("accepts %j", (schema) => {
    expect(jsonSchemaProblem(schema, compiler)).toBeNull();
  });

  it("keeps no schema of an earlier request: the same $id twice, and no reference to an earlier one", () => {
    const withId = { $id: "https://example.test/a", type: "object", properties: { b: { $id: "https://example.test/b", type: "string" } } };
    expect(jsonSchemaProblem(withId, compiler)).toBeNull();
    expect(jsonSchemaProblem(structuredClone(withId), compiler)).toBeNull();
    expect(jsonSchemaProblem({ $ref: "https://example.test/b" }, compiler)).toMatch(/points outside/);
  });

  it("checks a schema of thousands of branches quickly (it is never compiled)", () => {
    const wide = {
      anyOf: Array.from({ length: 5000 }, (_, i) => ({ type: "object", properties: { [`k${i}`]: { $ref: "#/$defs/x" } } })),
      $defs: { x: { type: "string" } },
    };
    const started = performance.now();
    expect(jsonSchemaProblem(wide, compiler)).toBeNull();
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
