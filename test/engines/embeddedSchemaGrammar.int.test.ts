import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTinyModel } from "../../tools/gguf/tinyModel.ts";
import { EngineError } from "../../workers/engines/engine.ts";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import { collectChat, userChat } from "../support/engines/engineTestKit.ts";

/**
 * Schemas the API refuses never reach a worker; should one reach the embedded engine anyway (an older
 * API, a schema the engine's grammar builder cannot handle), the engine refuses it as the client's
 * mistake (invalid_request: a 400 that records no charge), before it generates anything.
 */
describe("the embedded engine with a JSON schema it cannot build a grammar for", () => {
  let directory: string;
  let engine: EmbeddedEngine;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "tiny-model-"));
    const info = await writeTinyModel(join(directory, "tiny.gguf"));
    engine = await EmbeddedEngine.load({ modelPath: info.path, threads: 1, maxConcurrency: 1, contextSize: 512 }, { llama: await createLlama({ gpu: false }) });
  });
  afterAll(async () => {
    await engine?.close();
    await rm(directory, { recursive: true, force: true });
  });

  it.each([
    ["empty enum", { enum: [] }],
    ["type nonsense", { type: "nonsense" }],
    ["not anything", { not: {} }],
    ["nested empty enum", { type: "object", properties: { a: { enum: [] } }, required: ["a"] }],
  ])("%s: an invalid_request EngineError naming response_format, and no output", async (_name, schema) => {
    const deltas: unknown[] = [];
    const error = await engine
      .chat(
        userChat("Hi", { maxTokens: 16, responseFormat: { type: "json_schema", json_schema: { name: "x", schema } } }),
        (d) => deltas.push(d),
        new AbortController().signal,
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).kind).toBe("invalid_request");
    expect((error as EngineError).param).toBe("response_format");
    expect(deltas).toEqual([]);
  });

  it("still answers a satisfiable schema", async () => {
    const out = await collectChat(
      engine,
      userChat("Hi", { maxTokens: 40, temperature: 0, responseFormat: { type: "json_schema", json_schema: { name: "x", schema: { enum: ["yes", "no"] } } } }),
    );
    expect(['"yes"', '"no"']).toContain(out.text.trim());
  });

  it.each([
    ["a bounded integer", { type: "integer", minimum: 3, maximum: 7 }, (v: unknown) => Number.isInteger(v) && (v as number) >= 3 && (v as number) <= 7],
    ["a bounded number", { type: "number", minimum: 0, maximum: 1 }, (v: unknown) => typeof v === "number" && v >= 0 && v <= 1],
    ["a date", { type: "string", format: "date" }, (v: unknown) => typeof v === "string" && /^\d{4}-\d{2}-\d{2}$/.test(v)],
    ["a uuid", { type: "string", format: "uuid" }, (v: unknown) => typeof v === "string" && /^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(v)],
  ])("answers a schema that is one bounded value at its root (%s), within its bounds", async (_name, schema, valid) => {
    const out = await collectChat(
      engine,
      userChat("Hi", { maxTokens: 48, temperature: 0, responseFormat: { type: "json_schema", json_schema: { name: "x", schema } } }),
    );
    expect(valid(JSON.parse(out.text)), out.text).toBe(true);
  });

  it.each([1, 2, 3, 4])("holds a recursive schema ({$ref: '#'}) to the root's shape at every level (seed %i), never any JSON value", async (seed) => {
    const schema = { type: "object", properties: { c: { type: "array", items: { $ref: "#" }, maxItems: 1 } }, required: ["c"] };
    const out = await collectChat(
      engine,
      userChat("Hi", { maxTokens: 64, temperature: 1, seed, responseFormat: { type: "json_schema", json_schema: { name: "x", schema } } }),
    );
    // Whatever its length (a cut reply included), each array holds only objects of the root's shape.
    expect(out.text, out.text).toMatch(/^\s*\{\s*"c"/);
    expect(out.text, out.text).not.toMatch(/\[\s*(?![\s{\]])/);
    expect(out.text.replaceAll(/\s/g, ""), out.text).not.toMatch(/\[\{(?!"c")/);
  });
});
