import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Context } from "koa";
import { invalidRequestFromZod, paramPath, validate, validated } from "./validate.ts";

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

describe("validated: the input a route's validate(schema) parsed, typed by that schema", () => {
  const Limit = z.object({ limit: z.coerce.number().int().max(100) }).strict();
  const Other = z.object({ after: z.string() }).strict();
  const contextWith = (query: Record<string, string>) => ({ query, state: {} }) as unknown as Context;

  it("gives each handler the parsed value of its own schema, and several schemas' values side by side", async () => {
    const ctx = contextWith({ limit: "7" });
    let seen: { limit: number } | null = null;
    await validate(Limit, "query")(ctx, async () => {
      seen = validated(ctx, Limit);
    });
    expect(seen).toEqual({ limit: 7 });
    (ctx as unknown as { query: Record<string, string> }).query = { after: "x" };
    await validate(Other, "query")(ctx, async () => undefined);
    expect(validated(ctx, Limit)).toEqual({ limit: 7 });
    expect(validated(ctx, Other)).toEqual({ after: "x" });
  });

  it("refuses to hand out input a route never validated with that schema (a wiring error, not a client's)", async () => {
    const ctx = contextWith({ limit: "7" });
    await validate(Limit, "query")(ctx, async () => undefined);
    expect(() => validated(ctx, Other)).toThrow("mounted without validate(schema)");
    expect(() => validated(contextWith({}), Limit)).toThrow("mounted without validate(schema)");
  });

  it("refuses a bad input before the handler runs, as before", async () => {
    let ran = false;
    await expect(
      validate(Limit, "query")(contextWith({ limit: "1000" }), async () => {
        ran = true;
      }),
    ).rejects.toMatchObject({ status: 400, param: "limit" });
    expect(ran).toBe(false);
  });
});
