import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_ADMIN_TOKEN } from "../support/testApp.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";

/**
 * The tokens limit's 429 advises in the request's own terms: a Responses request is told of
 * `max_output_tokens` (it refuses `max_tokens`), an embeddings request (which generates nothing) to send
 * shorter input; both were told to ask for fewer `max_tokens`.
 */
let platform: TestPlatform;
let key: string;
beforeAll(async () => {
  platform = await startTestPlatform({});
  const created = await platform.createKey();
  key = created.key;
  const set = await fetch(`${platform.baseUrl}/api/v1/admin/accounts/${created.account.accountId}/rate_limits`, {
    method: "PUT",
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tokens_per_minute: 100 }),
  });
  expect(set.status).toBe(200);
});
afterAll(async () => {
  await platform?.close();
});

const refusal = async (path: string, body: object) => {
  const answer = await fetch(`${platform.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(answer.status).toBe(429);
  return ((await answer.json()) as { error: { code: string; message: string } }).error;
};

describe("the tokens limit's advice", () => {
  it("names max_output_tokens to a Responses request", async () => {
    const error = await refusal("/v1/responses", { model: TINY_CHAT, input: "x", max_output_tokens: 150 });
    expect(error.code).toBe("tokens");
    expect(error.message).toContain("max_output_tokens");
  });

  it("tells an embeddings request to send shorter input, not fewer max_tokens", async () => {
    const error = await refusal("/v1/embeddings", { model: TINY_EMBED, input: "word ".repeat(200) });
    expect(error.code).toBe("tokens");
    expect(error.message).toContain("embeddings request counts its input");
    expect(error.message).not.toContain("max_tokens");
  });
});
