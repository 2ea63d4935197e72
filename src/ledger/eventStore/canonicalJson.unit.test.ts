import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonicalJson.ts";
import { eventHash } from "./eventHash.ts";

describe("canonicalJson (RFC 8785)", () => {
  it("sorts members by UTF-16 code units and serialises numbers as ECMAScript does (RFC 8785 section 3.2.3 example)", () => {
    const input = JSON.parse(
      '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
    );
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
    expect(canonicalJson(JSON.parse("[1E30, 4.50, 2e-3, 0.000001, 1e-7, -0, 333333333.33333329]"))).toBe("[1e+30,4.5,0.002,0.000001,1e-7,0,333333333.3333333]");
  });

  it("is the same for an object and its JSON round trip with keys in another order (as jsonb returns them)", () => {
    const written = { b: [1, { z: null, a: "x" }], a: { deep: { deeper: [true, false] } }, n: 10.0, skipped: undefined };
    const readBack = JSON.parse('{"a":{"deep":{"deeper":[true,false]}},"n":10,"b":[1,{"a":"x","z":null}]}');
    expect(canonicalJson(written)).toBe(canonicalJson(readBack));
    expect(canonicalJson({})).toBe("{}");
    expect(canonicalJson([])).toBe("[]");
  });

  it("writes every string exactly as JSON.stringify does (escapes, lone surrogates, NUL)", () => {
    for (const text of ["", "plain", 'q"uote', "back\\slash", "\u0000\u001f\u007f", "\ud800", "a\udfffb", "\ud83d\ude00", "\u2028\u2029", "tab\tnew\nline"]) {
      expect(canonicalJson(text)).toBe(JSON.stringify(text));
    }
    fc.assert(fc.property(fc.string({ unit: "binary" }), (text) => canonicalJson(text) === JSON.stringify(text)));
  });

  it("reads back as the same value, whatever the JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it("refuses what JSON cannot hold", () => {
    expect(() => canonicalJson(Number.NaN)).toThrow(TypeError);
    expect(() => canonicalJson(10n)).toThrow(TypeError);
  });
});

describe("eventHash", () => {
  const fields = {
    prevHash: null,
    streamId: "account-1",
    streamVersion: 1,
    eventId: "00000000-0000-4000-8000-000000000001",
    type: "AccountRegistered",
    schemaVersion: 1,
    data: { email: "a@example.test" },
    metadata: { actor: "test" },
    recordedAt: "2026-01-01T00:00:00.000Z",
  };

  it("is SHA-256 over the canonical JSON of the fields (a fixed vector the offline verifier shares)", () => {
    expect(eventHash(fields)).toMatch(/^[0-9a-f]{64}$/);
    expect(eventHash(fields)).toBe(eventHash({ ...fields, data: JSON.parse('{"email":"a@example.test"}') }));
  });

  it("changes with every hashed field", () => {
    const base = eventHash(fields);
    const changed = [
      { prevHash: "00" },
      { streamId: "account-2" },
      { streamVersion: 2 },
      { eventId: "00000000-0000-4000-8000-000000000002" },
      { type: "X" },
      { schemaVersion: 2 },
      { data: { email: "b@example.test" } },
      { metadata: {} },
      { recordedAt: "2026-01-01T00:00:00.001Z" },
    ];
    for (const change of changed) expect(eventHash({ ...fields, ...change })).not.toBe(base);
  });
});
