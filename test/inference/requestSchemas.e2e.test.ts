import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/** The JSON text of a schema nested `depth` levels (properties inside properties), built as text: no stringify recursion. */
function deepSchemaJson(depth: number): string {
  return `${'{"type":"object","properties":{"a":'.repeat(depth)}{"type":"string"}${"}}".repeat(depth)}`;
}

const user = [{ role: "user", content: "Hi" }];
const tool = (parameters: unknown) => [{ type: "function", function: { name: "f", parameters } }];
const format = (schema: unknown) => ({ type: "json_schema", json_schema: { name: "answer", schema } });

describe("JSON Schemas in tools and response_format (real HTTP API, tiny model)", () => {
  let platform: TestPlatform;
  let key: string;
  let keyId: string;
  let accountId: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    const created = await platform.createKey();
    key = created.key;
    keyId = created.keyId;
    accountId = created.account.accountId;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const chat = (body: Record<string, unknown>) =>
    platform.request("POST", "/v1/chat/completions", { token: key, body: { model: TINY_CHAT, messages: user, ...body } });

  /** Nothing ran and nothing was charged for this key: no usage event, no money spent or held. */
  async function expectNothingCharged(): Promise<void> {
    const events = await platform.deps.pool.query("SELECT 1 FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'keyId' = $1", [keyId]);
    expect(events.rowCount).toBe(0);
    const budget = await platform.deps.pool.query(
      "SELECT coalesce(sum(spent_micro_chf), 0)::int AS spent, coalesce(sum(held_micro_chf), 0)::int AS held FROM rm_budget WHERE account_id = $1",
      [accountId],
    );
    expect(budget.rows[0]).toEqual({ spent: 0, held: 0 });
  }

  it.each([
    ["type nonsense", { type: "nonsense" }],
    ["required not an array", { type: "object", properties: { a: { type: "string" } }, required: "a" }],
    ["dangling $ref", { type: "object", properties: { a: { $ref: "#/$defs/missing" } } }],
    ["negative minLength", { type: "string", minLength: -1 }],
    ["properties not an object", { type: "object", properties: 3 }],
  ])("an invalid schema (%s) is a 400 naming the param, in tools and in response_format", async (_name, schema) => {
    const inTools = await chat({ tools: tool(schema) });
    expect(inTools.status).toBe(400);
    expect(inTools.body.error).toMatchObject({ type: "invalid_request_error", param: "tools[0].function.parameters" });
    const inFormat = await chat({ response_format: format(schema) });
    expect(inFormat.status).toBe(400);
    expect(inFormat.body.error).toMatchObject({ type: "invalid_request_error", param: "response_format.json_schema.schema" });
    await expectNothingCharged();
  });

  it.each([
    ["empty enum", { enum: [] }],
    ["not anything", { not: {} }],
    ["false schema", false],
    ["unsatisfiable property", { type: "object", properties: { a: { enum: [] } }, required: ["a"] }],
    ["type nonsense", { type: "nonsense" }],
  ])("a schema no output can satisfy (%s) is a 400 before anything is queued or charged", async (_name, schema) => {
    const response = await chat({ response_format: format(schema), max_tokens: 8 });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param: "response_format.json_schema.schema" });
    await expectNothingCharged();
  });

  it.each([
    ["tools", (schema: string) => `"tools":[{"type":"function","function":{"name":"f","parameters":${schema}}}]`, "tools[0].function.parameters"],
    [
      "response_format",
      (schema: string) => `"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":${schema}}}`,
      "response_format.json_schema.schema",
    ],
  ])(
    "a %s schema nested deeper than 64 levels is a 400 naming it, and one thousands of levels deep a 400 for the body, never a 500",
    async (_name, place, param) => {
      const body = (depth: number) => `{"model":"${TINY_CHAT}","messages":[{"role":"user","content":"Hi"}],${place(deepSchemaJson(depth))}}`;
      const deeper = await platform.request("POST", "/v1/chat/completions", { token: key, body: body(40) });
      expect(deeper.status).toBe(400);
      expect(deeper.body.error).toMatchObject({ type: "invalid_request_error", param });
      expect(deeper.body.error.message).toMatch(/nested too deeply \(more than 64 levels\)/);
      // The body itself is refused as it arrives, before it is parsed.
      const thousands = await platform.request("POST", "/v1/chat/completions", { token: key, body: body(3000) });
      expect(thousands.status).toBe(400);
      expect(thousands.body.error).toMatchObject({ type: "invalid_request_error", param: null, code: "request_too_complex" });
      expect(thousands.body.error.message).toMatch(/nested more than 128 levels/);
      await expectNothingCharged();
    },
  );

  it("serves a recursive schema (a $ref to its root), which the embedded engine builds a grammar for", async () => {
    const recursive = { type: "object", properties: { name: { type: "string" }, child: { $ref: "#" } }, required: ["name"] };
    const response = await chat({ response_format: format(recursive), max_tokens: 8 });
    expect(response.status).toBe(200);
  });

  it("still serves valid schemas: draft-07 $schema, $defs with $ref, anyOf, and a tool without parameters", async () => {
    const schema = {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { answer: { $ref: "#/$defs/word" }, n: { anyOf: [{ type: "integer" }, { type: "null" }] } },
      required: ["answer", "n"],
      additionalProperties: false,
      $defs: { word: { type: "string", enum: ["yes", "no"] } },
    };
    const response = await chat({ response_format: format(schema), max_tokens: 40, temperature: 0 });
    expect(response.status).toBe(200);
    const withTool = await chat({ tools: [{ type: "function", function: { name: "g" } }, ...tool(JSON.parse(deepSchemaJson(5)))], max_tokens: 8 });
    expect(withTool.status).toBe(200);
  });
});
