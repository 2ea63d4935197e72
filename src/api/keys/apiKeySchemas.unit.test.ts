import { describe, expect, it } from "vitest";
import { CreateKeyBodySchema, KeyIdSchema } from "./apiKeySchemas.ts";

describe("apiKeySchemas", () => {
  it("trims names and checks the trimmed length", () => {
    expect(CreateKeyBodySchema.parse({ name: "  prod  " })).toEqual({ name: "prod" });
    expect(CreateKeyBodySchema.parse({ name: ` ${"x".repeat(100)} ` }).name).toHaveLength(100);
    for (const name of ["", "   ", "x".repeat(101), 42, null]) {
      const result = CreateKeyBodySchema.safeParse({ name });
      expect(result.success).toBe(false);
      expect(result.error?.issues[0]?.path).toEqual(["name"]);
    }
  });

  it("refuses names that show nothing or read as something else: zero-width only, controls, bidirectional overrides", () => {
    for (const name of ["\u200b\u200b", "\u200d", "\u2060\ufeff", "a\u0007b", "a\nb", "\u202egnp.exe", "x\u2066y"]) {
      const result = CreateKeyBodySchema.safeParse({ name });
      expect(result.success, JSON.stringify(name)).toBe(false);
      expect(result.error?.issues[0]?.path).toEqual(["name"]);
    }
    for (const name of ["prod", "日本語", "👩‍💻 laptop", "a b"]) expect(CreateKeyBodySchema.parse({ name }).name).toBe(name);
  });

  it("refuses unknown fields", () => {
    expect(CreateKeyBodySchema.safeParse({ name: "a", scope: "all" }).error?.issues[0]?.code).toBe("unrecognized_keys");
  });

  it("accepts uuids only, lower-cased", () => {
    expect(KeyIdSchema.parse("3F2504E0-4F89-41D3-9A0C-0305E82C3301")).toBe("3f2504e0-4f89-41d3-9a0c-0305e82c3301");
    for (const bad of ["", "abc", "create", "3f2504e0-4f89-41d3-9a0c-0305e82c330", "' OR 1=1 --"]) {
      expect(KeyIdSchema.safeParse(bad).success).toBe(false);
    }
  });
});
