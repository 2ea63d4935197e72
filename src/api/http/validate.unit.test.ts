import { describe, expect, it } from "vitest";
import { z } from "zod";
import { invalidRequestFromZod, paramPath } from "./validate.ts";

const Schema = z.object({ name: z.string().min(1), items: z.array(z.object({ n: z.number().max(2) }).strict()) }).strict();

function errorFor(input: unknown) {
  const result = Schema.safeParse(input);
  if (result.success) throw new Error("expected a validation error");
  return invalidRequestFromZod(result.error);
}

describe("validate: zod issues become invalid_request_error naming the param", () => {
  it("reports a missing required parameter", () => {
    const error = errorFor({ items: [] });
    expect([error.status, error.type, error.param, error.code]).toEqual([400, "invalid_request_error", "name", "missing_required_parameter"]);
  });
  it("reports an invalid nested value with a bracketed path", () => {
    const error = errorFor({ name: "x", items: [{ n: 1 }, { n: 5 }] });
    expect(error.param).toBe("items[1].n");
    expect(error.code).toBe("invalid_value");
  });
  it("reports unknown fields by name, nested ones with their path", () => {
    expect(errorFor({ name: "x", items: [], extra: 1 }).param).toBe("extra");
    const nested = errorFor({ name: "x", items: [{ n: 1, bogus: true }] });
    expect(nested.param).toBe("items[0].bogus");
    expect(nested.code).toBe("unknown_parameter");
  });
  it("formats paths", () => {
    expect(paramPath(["messages", 0, "content"])).toBe("messages[0].content");
  });
});
