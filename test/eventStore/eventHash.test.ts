import { hash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/ledger/eventStore/canonicalJson.ts";
import { canonicalEventJson, eventHash, type HashedEventFields } from "../../src/ledger/eventStore/eventHash.ts";

const base: HashedEventFields = {
  prevHash: "ab".repeat(32),
  streamId: "completion-1",
  streamVersion: 3,
  eventId: "0d6f3c1e-4c1a-4b8e-9d2a-1f2e3d4c5b6a",
  type: "UsageRecorded",
  schemaVersion: 1,
  data: { z: 1, a: [1, "two", { y: null, b: true }], é: '\u0001"quote"', nested: { k: -0.5, j: 1e21 } },
  metadata: { actor: "worker" },
  recordedAt: "2025-01-01T00:00:00.123Z",
};

describe("eventHash", () => {
  it("hashes the canonical JSON of the event's fields, written in sorted order without sorting", () => {
    const cases: HashedEventFields[] = [
      base,
      { ...base, prevHash: null, streamVersion: 1 },
      { ...base, data: {}, metadata: {} },
      { ...base, data: undefined, metadata: undefined },
      { ...base, data: "a string", metadata: [1, 2] },
    ];
    for (const fields of cases) {
      const generic = canonicalJson({ ...fields });
      expect(canonicalEventJson(fields)).toBe(generic);
      expect(eventHash(fields)).toBe(hash("sha256", generic, "hex"));
    }
  });

  it("is a fixed value for a fixed event (the hash stored in the log must never change)", () => {
    expect(eventHash(base)).toBe(hash("sha256", canonicalJson({ ...base }), "hex"));
    expect(canonicalEventJson(base)).toBe(
      '{"data":{"a":[1,"two",{"b":true,"y":null}],"nested":{"j":1e+21,"k":-0.5},"z":1,"é":"\\u0001\\"quote\\""},"eventId":"0d6f3c1e-4c1a-4b8e-9d2a-1f2e3d4c5b6a","metadata":{"actor":"worker"},"prevHash":"abababababababababababababababababababababababababababababababab","recordedAt":"2025-01-01T00:00:00.123Z","schemaVersion":1,"streamId":"completion-1","streamVersion":3,"type":"UsageRecorded"}',
    );
  });
});
