import type { Llama } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { EngineError } from "../engine.ts";
import { createLlama } from "./createLlama.ts";
import { toGbnfSchema, ValueRules } from "./toGbnfSchema.ts";

/** ValueRules that also keeps each placeholder's name and grammar, for the reference below. */
class RecordingRules extends ValueRules {
  readonly recorded = new Map<string, string>();
  override placeholder(grammar: string): string {
    const name = super.placeholder(grammar);
    this.recorded.set(name, grammar);
    return name;
  }
}

/**
 * The implementation apply replaced (one regex, one test and one replace over the whole text per
 * placeholder: quadratic), kept as the reference its output must equal byte for byte.
 */
function applyOneByOne(grammar: string, rules: ReadonlyMap<string, string>): string {
  let text = grammar;
  for (const [name, rule] of rules) {
    const line = new RegExp(`^([A-Za-z0-9-]+) ::= "\\\\"${name}\\\\""$`, "m");
    if (!line.test(text)) throw new EngineError("internal", "The JSON schema's grammar could not be built");
    text = text.replace(line, (_match, ruleName: string) => `${ruleName} ::= ${rule}`);
  }
  return text;
}

/** A placeholder's rule line as node-llama-cpp writes the rule of a string constant. */
const constLine = (rule: string, name: string): string => `${rule} ::= "\\"${name}\\""`;

/** Placeholders of every kind: each string format, bounded integers and numbers, in objects, arrays, $defs and anyOf. */
const MIXED_SCHEMA = {
  type: "object",
  properties: {
    email: { type: "string", format: "email" },
    id: { type: "string", format: "uuid", description: "the id" },
    site: { type: "string", format: "uri" },
    host: { type: "string", format: "hostname" },
    v4: { type: "string", format: "ipv4" },
    v6: { type: "string", format: "ipv6" },
    wait: { type: "string", format: "duration" },
    day: { type: "string", format: "date" },
    at: { type: "string", format: "date-time" },
    age: { type: "integer", minimum: 0, maximum: 130 },
    floor: { type: "integer", minimum: -3 },
    ceiling: { type: "integer", maximum: 7 },
    open: { type: "integer", exclusiveMinimum: -10, exclusiveMaximum: 10 },
    ratio: { type: "number", minimum: 0, maximum: 1 },
    offset: { type: "number", minimum: -2.5, maximum: 99 },
    scores: { type: "array", items: { type: "integer", minimum: 1, maximum: 5 } },
    either: {
      anyOf: [
        { type: "string", format: "date" },
        { type: "integer", minimum: 100, maximum: 200 },
      ],
    },
    nested: { type: "object", properties: { when: { type: "string", format: "date-time" }, count: { type: "integer", minimum: 0, maximum: 9 } } },
    ref: { $ref: "#/$defs/bounded" },
  },
  $defs: { bounded: { type: "number", minimum: -1000, maximum: 1000 } },
  required: ["email", "id", "age", "ratio", "scores", "nested"],
};

describe("ValueRules.apply", () => {
  let llama: Llama;
  beforeAll(async () => {
    llama = await createLlama({ gpu: false });
  });
  afterAll(async () => {
    await llama?.dispose();
  });

  it("writes node-llama-cpp's grammar of a schema with placeholders of every kind exactly as the one-by-one replacement did", async () => {
    const rules = new RecordingRules();
    const schema = toGbnfSchema(MIXED_SCHEMA, "response_format", rules);
    expect(rules.size).toBeGreaterThanOrEqual(20);
    const grammar = (await llama.createGrammarForJsonSchema(schema as never)).grammar;
    const applied = rules.apply(grammar);
    expect(applied).toBe(applyOneByOne(grammar, rules.recorded));
    expect(applied).not.toContain("gbnfvalue");
    for (const rule of rules.recorded.values()) expect(applied).toContain(` ::= ${rule}\n`);
  });

  it("matches the one-by-one replacement on the grammar's edge cases: names that prefix others, a repeated rule, mentions outside a rule's own line", () => {
    const rules = new RecordingRules();
    // A rule with replacement patterns in it ($&, $1) is written as it is.
    const names = Array.from({ length: 12 }, (_, i) => rules.placeholder(i === 4 ? `"$& $1 $$"` : i % 2 === 0 ? `[0-${i % 10}]` : `"\\"" [a-z]{${i}} "\\""`));
    const [first, second, , , , , , , , , , last] = names as [string, string, ...string[]];
    const lines = [
      `root ::= "{" val11 "," val1 "," val10 "," ${names.map((_, i) => `val${i}`).join(" ")} "}"`,
      ...names.map((name, i) => constLine(`val${i}`, name)).reverse(),
      // A second rule of one placeholder is left as it is (only the first is replaced), as before.
      constLine("again-1", second),
      // A placeholder of this nonce that was never made, and one of another request: untouched.
      constLine("stray", `${first.replace(/n0$/, "n999")}`),
      constLine("other", "gbnfvalue000000000000n0"),
      // Not a rule of its own: a literal that contains the name, and a line with more after it.
      `mention ::= "\\"${last}\\"" | "x"`,
      "",
    ];
    const grammar = lines.join("\n");
    const applied = rules.apply(grammar);
    expect(applied).toBe(applyOneByOne(grammar, rules.recorded));
    expect(applied).toContain(constLine("again-1", second));
    expect(applied).toContain(`mention ::= "\\"${last}\\"" | "x"`);
    expect(applied).toContain(`val1 ::= "\\"" [a-z]{1} "\\""`);
    expect(applied).toContain("val10 ::= [0-0]");
    expect(applied).toContain('val4 ::= "$& $1 $$"');
  });

  it("refuses (internal) a grammar without the rule of a placeholder, as before", () => {
    const rules = new RecordingRules();
    const kept = rules.placeholder("[0-9]");
    rules.placeholder("[a-z]");
    const grammar = `root ::= val0\n${constLine("val0", kept)}\n`;
    expect(() => applyOneByOne(grammar, rules.recorded)).toThrow(EngineError);
    const error = (() => {
      try {
        rules.apply(grammar);
      } catch (caught) {
        return caught;
      }
      return null;
    })();
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).kind).toBe("internal");
  });

  /**
   * 8,000 placeholders took the one-by-one replacement seconds of blocking (a regex, a test and a replace
   * over the whole text for each). Structural, not timed: the scans of the text (regex searches and
   * replaces, string searches) are counted, and are as many for 8,000 placeholders as for 10.
   */
  it("scans the grammar text a fixed number of times, whatever the number of placeholders", () => {
    const scans = (count: number): number => {
      const rules = new ValueRules();
      const names = Array.from({ length: count }, () => rules.placeholder('("0" | [1-9] [0-9]{0,3})'));
      const grammar = [`root ::= ${names.map((_, i) => `val${i}`).join(" ")}`, ...names.map((name, i) => constLine(`val${i}`, name)), ""].join("\n");
      const spies = [
        vi.spyOn(RegExp.prototype, "test"),
        vi.spyOn(RegExp.prototype, Symbol.replace),
        vi.spyOn(RegExp.prototype, Symbol.match),
        vi.spyOn(RegExp.prototype, Symbol.matchAll),
        vi.spyOn(RegExp.prototype, Symbol.split),
        vi.spyOn(String.prototype, "replace"),
        vi.spyOn(String.prototype, "replaceAll"),
        vi.spyOn(String.prototype, "split"),
        vi.spyOn(String.prototype, "indexOf"),
        vi.spyOn(String.prototype, "includes"),
      ];
      let applied: string;
      let total: number;
      try {
        applied = rules.apply(grammar);
        total = spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
      } finally {
        for (const spy of spies) spy.mockRestore();
      }
      expect(applied.split("\n").filter((line) => line.includes("gbnfvalue"))).toEqual([]);
      return total;
    };
    const few = scans(10);
    expect(few).toBeLessThanOrEqual(4);
    expect(scans(8_000)).toBe(few);
  });
});

describe("toGbnfSchema's references", () => {
  it("gives the root a definition of its own when a schema refers to it (#), so a recursive schema is enforced", () => {
    const schema = { type: "object", properties: { c: { type: "array", items: { $ref: "#" }, maxItems: 1 } } };
    expect(toGbnfSchema(schema, "response_format")).toEqual({
      type: "object",
      properties: { c: { type: "array", items: { $ref: "#/$defs/ref0" }, maxItems: 1 } },
      $defs: { ref0: { type: "object", properties: { c: { type: "array", items: { $ref: "#/$defs/ref0" }, maxItems: 1 } } } },
    });
  });

  it("keeps #/$defs/<name> and #/definitions/<name> as node-llama-cpp follows them; hoists pointers elsewhere and anchors, one definition each", () => {
    const schema = {
      type: "object",
      properties: {
        a: { $ref: "#/$defs/item" },
        b: { $ref: "#/definitions/other" },
        c: { $ref: "#/properties/a" },
        d: { $ref: "#/$defs/item/properties/n" },
        e: { $ref: "#leaf" },
        f: { $ref: "#/properties/a" },
        g: { $ref: "#/$defs/ref0" },
      },
      $defs: { item: { type: "object", properties: { n: { type: "integer" } } }, ref0: { type: "boolean" } },
      definitions: { other: { type: "string", $anchor: "leaf" } },
    };
    const out = toGbnfSchema(schema, "response_format") as { properties: Record<string, { $ref: string }>; $defs: Record<string, unknown> };
    expect(Object.fromEntries(Object.entries(out.properties).map(([k, v]) => [k, v.$ref]))).toEqual({
      a: "#/$defs/item",
      b: "#/$defs/other",
      c: "#/$defs/ref1",
      d: "#/$defs/ref2",
      e: "#/$defs/ref3",
      f: "#/$defs/ref1",
      g: "#/$defs/ref0",
    });
    // A generated name never takes a name the schema defines (ref0 is the schema's own).
    expect(out.$defs.ref0).toEqual({ type: "boolean" });
    expect(out.$defs.ref1).toEqual({ $ref: "#/$defs/item" });
    expect(out.$defs.ref2).toEqual({ type: "integer" });
    expect(out.$defs.ref3).toEqual({ type: "string" });
  });
});
