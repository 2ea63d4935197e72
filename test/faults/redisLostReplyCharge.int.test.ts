import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { decodeReplayEntries } from "../../src/contracts/replyBatch.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { startWorker, type RunningWorker } from "../../workers/startWorker.ts";
import { gatedEngine } from "../inference/gatedEngine.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { sweepNow } from "../usage/sweepNow.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.ts";
import { TINY_CHAT, startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";

/**
 * Part of a streamed reply lost for good on its way to the client, end to end: the API reaches Redis
 * through a TCP proxy of the test's own, the worker directly. While the proxy refuses connections (the
 * API's subscriber is away), the worker writes a delta whose replay stream entry is then deleted (as a
 * Redis restarted empty loses it); the next delta shows the API a gap it cannot fill. The request ends
 * with an error event `redis_unavailable`, and the completion tokens charged are those the client was
 * sent, not those the worker generated. And a whole answer that the worker finished and charged in the
 * moment before the API gave up on it (its last messages lost likewise): the client gets 503, and the
 * projector's sweeper refunds the charge (UsageRefunded) from the API's note of what the client got.
 */
describe("a streamed reply lost for good on its way to the client", () => {
  let proxy: TcpProxy;
  let platform: TestPlatform;
  let worker: RunningWorker | null = null;
  let direct: Redis;
  const gate = { allowed: 0 };

  beforeAll(async () => {
    const target = new URL(TEST_REDIS_URL);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
    platform = await startTestPlatform({ redisUrl: proxy.rewrite(TEST_REDIS_URL), startWorker: false, env: { JOB_IDLE_TIMEOUT_MS: "120000" } });
    const config = { ...platform.deps.config, redisUrl: TEST_REDIS_URL, redis: { mode: "single" as const, url: TEST_REDIS_URL } };
    worker = await startWorker(
      { config, pool: platform.deps.pool, logger: silentLogger, metrics: platform.deps.metrics },
      {
        wrapEngine: (_model, engine) => gatedEngine(engine, gate),
      },
    );
    direct = createRedis(TEST_REDIS_URL, { kind: "worker" });
  }, 60_000);
  afterAll(async () => {
    gate.allowed = Number.POSITIVE_INFINITY;
    await proxy?.setMode("pass");
    await worker?.stop();
    direct?.disconnect();
    await platform?.close();
    await proxy?.close();
  });

  it("ends the request with redis_unavailable and charges only the tokens the client received", async () => {
    const { key } = await platform.createKey();
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    const replay = async (id: string): Promise<DeltaMessage[]> => decodeReplayEntries(await direct.xrange(keys.replayStream(id), "-", "+"));
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({
        model: TINY_CHAT,
        messages: [{ role: "user", content: "Hello there" }],
        max_tokens: 24,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      }),
      signal: AbortSignal.timeout(60_000),
    });
    expect(response.status).toBe(200);
    const completionId = response.headers.get("x-completion-id")!;
    // The client's view: the ids of the events with content, the error code, [DONE].
    const client = { seqs: [] as number[], errorCode: null as string | null, done: false };
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const part of response.body!) {
        buffer += decoder.decode(part, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end).split("\n");
          buffer = buffer.slice(end + 2);
          const id = block.find((line) => line.startsWith("id: "))?.slice(4);
          const data = block.find((line) => line.startsWith("data: "))?.slice(6);
          if (!data) continue;
          if (data === "[DONE]") client.done = true;
          else if (JSON.parse(data).error) client.errorCode = JSON.parse(data).error.code;
          else if (id !== undefined) client.seqs.push(Number(id));
        }
      }
    })();

    // Three deltas reach the client (seq 1, 2, 3; seq 0 is `started`).
    for (let n = 1; n <= 3; n++) {
      gate.allowed = n;
      await eventually(async () => (client.seqs.includes(n) ? true : undefined), 10_000);
    }
    // The API loses its connections to Redis; the worker writes the 4th delta meanwhile, and its replay
    // entry is lost (as with a Redis restarted empty).
    await proxy.setMode("refuse");
    gate.allowed = 4;
    const lost = await eventually(async () => (await replay(completionId)).find((m) => m.seq === 4), 10_000);
    await direct.xdel(
      keys.replayStream(completionId),
      ...(await direct.xrange(keys.replayStream(completionId), "-", "+")).filter(([, f]) => f.join().includes('"seq":4')).map(([entryId]) => entryId),
    );
    expect((await replay(completionId)).some((m) => m.seq === 4)).toBe(false);
    await proxy.setMode("pass");
    // Once the API is back, the 5th delta shows it the gap that cannot be filled.
    await eventually(async () => (platform.inference.subscriber.away ? undefined : true), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    gate.allowed = 5;
    await reading;
    expect(client.errorCode).toBe("redis_unavailable");
    expect(client.done).toBe(true);
    expect(client.seqs).toEqual([1, 2, 3]);

    // What the worker generated: 5 deltas (the lost one included); what the client got: the first 3.
    const written = [...(await replay(completionId)), lost!].filter((m): m is Extract<DeltaMessage, { type: "delta" }> => m.type === "delta");
    const tokensOf = (seqs: number[]) => written.filter((m) => seqs.includes(m.seq)).reduce((sum, m) => sum + (m.tokens ?? 0), 0);
    const received = tokensOf([1, 2, 3]);
    expect(tokensOf([1, 2, 3, 4, 5])).toBeGreaterThan(received);
    const events = await eventually(async () => {
      const found = await completionEvents(platform.deps.pool, completionId);
      return found.length ? found : undefined;
    }, 20_000);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled", completionTokens: received });
  }, 90_000);

  it("refunds a whole answer charged in the moment before the API gave up on it", async () => {
    const { key, account } = await platform.createKey();
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    const replay = async (id: string): Promise<DeltaMessage[]> => decodeReplayEntries(await direct.xrange(keys.replayStream(id), "-", "+"));
    gate.allowed = 0;
    const answering = fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hello again" }], max_tokens: 6, temperature: 0 }),
      signal: AbortSignal.timeout(60_000),
    });
    const completionId = await eventually(async () => {
      const found = await direct.keys(`${keys.replayStream("")}*`);
      const ids = found.map((k) => k.slice(keys.replayStream("").length));
      for (const id of ids)
        if ((await replay(id)).some((m) => m.type === "started") && (await completionEvents(platform.deps.pool, id)).length === 0) return id;
      return undefined;
    }, 20_000);
    // The API loses Redis; meanwhile the worker finishes the answer and records its whole usage.
    await proxy.setMode("refuse");
    gate.allowed = Number.POSITIVE_INFINITY;
    const charged = await eventually(async () => (await completionEvents(platform.deps.pool, completionId))[0], 20_000);
    expect(charged.type).toBe("UsageRecorded");
    expect(charged.data.completionTokens).toBeGreaterThan(0);
    await eventually(async () => ((await replay(completionId)).some((m) => m.type === "usage") ? true : undefined), 10_000);
    // A delta's replay entry is lost (as with a Redis restarted empty): the API cannot complete the answer.
    const entries = await direct.xrange(keys.replayStream(completionId), "-", "+");
    await direct.xdel(keys.replayStream(completionId), ...entries.filter(([, f]) => f.join().includes('"type":"delta"')).map(([entryId]) => entryId));
    await proxy.setMode("pass");
    const response = await answering;
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("redis_unavailable");

    // The projector's sweeper takes back what the client was never sent: the whole charge.
    const events = await eventually(async () => {
      await sweepNow(platform.deps.pool);
      const found = await completionEvents(platform.deps.pool, completionId);
      return found.length === 2 ? found : undefined;
    }, 20_000);
    expect(events[1]!.type).toBe("UsageRefunded");
    expect(events[1]!.data).toMatchObject({
      completionTokens: charged.data.completionTokens,
      promptTokens: charged.data.promptTokens,
      costMicroChf: charged.data.costMicroChf,
      deliveredCompletionTokens: null,
    });
    const spent = await platform.deps.pool.query<{ spent: string }>("SELECT coalesce(sum(spent_micro_chf), 0) AS spent FROM rm_budget WHERE account_id = $1", [
      account.accountId,
    ]);
    expect(Number(spent.rows[0]!.spent)).toBe(0);
  }, 90_000);
});
