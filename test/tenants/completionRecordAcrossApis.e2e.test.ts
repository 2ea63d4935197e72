import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { SseReader } from "../inference/sseReader.ts";
import { completionRecordCount } from "../support/completionRecordCount.ts";
import { type Tenant, TENANT_MODEL, TenantPlatform, tenantChat } from "./tenantPlatform.ts";

/**
 * The completion record an API writes with the enqueue (one command: the record, one listener, its
 * expiry) is what another API process reads: the stored completion and a resume with Last-Event-ID
 * from the other API. A request that a tenant limit refuses leaves no record behind.
 */
let platform: TenantPlatform;
let keys: InferenceKeys;

beforeAll(async () => {
  platform = await TenantPlatform.start({ apis: 2, workers: 1, slotsPerWorker: 4, tokens: 6, tokenDelayMs: 10 });
  keys = new InferenceKeys(platform.redis.prefix);
}, 120_000);

afterAll(async () => {
  await platform?.stop();
}, 60_000);

const get = (api: string, key: string, completionId: string, query = "", headers: Record<string, string> = {}) =>
  fetch(`${api}/v1/chat/completions/${completionId}${query}`, { headers: { authorization: `Bearer ${key}`, ...headers } });

describe("the completion record across API processes", () => {
  let tenant: Tenant;

  beforeAll(async () => {
    tenant = await platform.tenant();
  });

  it("a stream served by one API is read whole and resumed with Last-Event-ID from the other", async () => {
    const response = await fetch(`${platform.apis[0]}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TENANT_MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: 20, stream: true }),
    });
    expect(response.status).toBe(200);
    const completionId = response.headers.get("x-completion-id")!;
    const events = (await new SseReader(response).rest()).filter((item) => item.data !== undefined);
    expect(events.at(-1)!.data).toBe("[DONE]");
    const text = events
      .filter((item) => item.data !== "[DONE]")
      .map((item) => (JSON.parse(item.data!) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? "")
      .join("");
    expect(text.length).toBeGreaterThan(0);

    // The record: whole, with one listener counted for the stream, and an expiry.
    const recordKey = keys.completionRecord(completionId);
    expect(JSON.parse((await platform.redis.redis.hget(recordKey, "meta"))!)).toMatchObject({ completionId, accountId: tenant.accountId, model: TENANT_MODEL });
    expect(await platform.redis.redis.ttl(recordKey)).toBeGreaterThan(0);

    const stored = await get(platform.apis[1]!, tenant.key, completionId);
    expect(stored.status).toBe(200);
    const body = (await stored.json()) as { id: string; choices: { message: { content: string } }[] };
    expect(body.id).toBe(completionId);
    expect(body.choices[0]!.message.content).toBe(text);

    // Resumed after its second event: the rest, byte for byte as the original sent it.
    const resumed = await get(platform.apis[1]!, tenant.key, completionId, "?stream=true", { "last-event-id": events[1]!.id! });
    expect(resumed.status).toBe(200);
    const rest = (await new SseReader(resumed).rest()).filter((item) => item.data !== undefined);
    expect(rest.map((item) => item.data)).toEqual(events.slice(2).map((item) => item.data));
  });

  it("a request a tenant limit refuses leaves no record, and its answer names no completion", async () => {
    const limited = await platform.tenant();
    expect((await platform.setRateLimits(limited.accountId, { key_requests_per_minute: 1 })).status).toBe(200);
    const answered = await tenantChat(platform.apis[0]!, limited.key);
    expect(answered.status).toBe(200);
    expect(answered.headers.get("x-completion-id")).toMatch(/^chatcmpl-/);
    const records = () => completionRecordCount(platform.redis.redis, platform.redis.prefix);
    const before = await records();
    const refused = await tenantChat(platform.apis[0]!, limited.key);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: "requests" });
    expect(refused.headers.get("x-completion-id")).toBeNull();
    expect(await records()).toBe(before);
  });
});
