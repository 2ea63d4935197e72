import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

describe("sampling seeds (real HTTP API, tiny model)", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const text = async (body: Record<string, unknown>): Promise<string> => {
    const response = await platform.request("POST", "/v1/completions", {
      token: key,
      body: { model: TINY_CHAT, prompt: "Once upon a time", max_tokens: 48, temperature: 1, ...body },
    });
    expect(response.status).toBe(200);
    return response.body.choices[0].text as string;
  };

  it("samples fresh for each request without a seed, even for identical requests in the same second", async () => {
    const [a, b] = await Promise.all([text({}), text({})]);
    const c = await text({});
    expect(a.length).toBeGreaterThan(0);
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it("repeats itself for the same seed, and differs for another seed", async () => {
    const [a, b] = await Promise.all([text({ seed: 1234 }), text({ seed: 1234 })]);
    expect(b).toBe(a);
    const others = await Promise.all([text({ seed: 1 }), text({ seed: 2 }), text({ seed: 3 })]);
    expect(others.some((other) => other !== a)).toBe(true);
  });
});
