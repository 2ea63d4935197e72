import { describe, expect, it } from "vitest";
import { checkJsonValue, storableJson } from "./jsonValueCheck.ts";

const LIMITS = { maxDepth: 4, maxMembers: 3, maxValues: 20 };

describe("checkJsonValue", () => {
  it("passes storable values within the limits", () => {
    expect(checkJsonValue({ a: [1, "x", null, { b: true }], "é😀": "ok" }, LIMITS)).toBeNull();
  });

  it("names the first string or key holding U+0000 or an unpaired surrogate", () => {
    expect(checkJsonValue({ a: ["x", "y\u0000"] }, LIMITS)).toMatchObject({ path: "a[1]", message: expect.stringMatching(/NUL/) });
    expect(checkJsonValue({ a: { b: "\udc00x" } }, LIMITS)?.path).toBe("a.b");
    expect(checkJsonValue({ a: { "k\u0000": 1 } }, LIMITS)).toMatchObject({ path: "a", message: expect.stringMatching(/key/) });
    expect(checkJsonValue("\ud800", LIMITS)?.path).toBe("");
  });

  it("names an object with an own __proto__ key (as JSON.parse makes it), which every later copy would drop", () => {
    expect(checkJsonValue(JSON.parse('{"body": {"metadata": {"__proto__": "v"}}}'), LIMITS)).toMatchObject({
      path: "body.metadata",
      message: expect.stringMatching(/__proto__/),
    });
    expect(checkJsonValue({ text: "__proto__" }, LIMITS)).toBeNull();
  });

  it("names nesting, members and values past the limits, iteratively however deep", () => {
    expect(checkJsonValue({ a: [[[1]]] }, LIMITS)).toBeNull();
    expect(checkJsonValue({ a: [[[[1]]]] }, LIMITS)).toMatchObject({ path: "a[0][0][0]", message: "is nested more than 4 levels deep" });
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(checkJsonValue(deep)?.path).toBe("[0][0][0][0][0][0][0][0][0][0][0][0]...");
    expect(checkJsonValue({ a: 1, b: 2, c: 3, d: 4 }, LIMITS)?.message).toBe("has more than 3 members");
    expect(
      checkJsonValue(
        Array.from({ length: 25 }, () => 1),
        LIMITS,
      )?.message,
    ).toBe("holds more than 20 JSON values");
  });
});

describe("storableJson", () => {
  it("is JSON.stringify for storable values", () => {
    const value = { a: "x\\u0000 typed as text", b: ["😀", 1, null] };
    expect(storableJson(value)).toBe(JSON.stringify(value));
  });

  it("replaces U+0000 and unpaired surrogates, in strings and keys, by U+FFFD and keeps surrogate pairs", () => {
    const text = storableJson({ "k\u0000": ["a\u0000b", "\ud800c\udc00", "😀"] });
    expect(JSON.parse(text)).toEqual({ "k\uFFFD": ["a\uFFFDb", "\uFFFDc\uFFFD", "😀"] });
  });
});
