import { describe, expect, it } from "vitest";
import { capabilitiesWhere, MODEL_CAPABILITIES, pickCapabilities } from "./modelCapabilities.ts";
import { ModelCapabilitiesSchema } from "./modelRegistrySchema.ts";

describe("the one capability vocabulary", () => {
  it("is what the registry's capabilities take: each one false unless declared, nothing else", () => {
    expect(Object.keys(ModelCapabilitiesSchema.parse({}))).toEqual([...MODEL_CAPABILITIES]);
    expect(ModelCapabilitiesSchema.parse({ json_schema: true })).toEqual(capabilitiesWhere((name) => name === "json_schema"));
    expect(ModelCapabilitiesSchema.safeParse({ jsonSchema: true }).success).toBe(false);
  });

  it("picks only the capability flags of a larger object", () => {
    const engine = { ...capabilitiesWhere((name) => name === "chat"), continuation: true, contextLength: 512 };
    expect(pickCapabilities(engine)).toEqual(capabilitiesWhere((name) => name === "chat"));
  });
});
