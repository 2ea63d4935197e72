import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { decodeReplayEntries } from "../../src/contracts/replyBatch.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { type CountingUpstream, countingReply, startCountingUpstream, countingModel } from "./countingUpstream.ts";
import { exited, spawnWorker } from "./workerCrashScenario.ts";

const MODEL = "counting-model";
const TOKENS = 60;
const PROMPT_TOKENS = 20;

/**
 * A worker cut off from Redis mid-generation (a TCP proxy of its own in front of Redis holds its traffic
 * both ways, then delivers it, as a healed partition does), while its engine goes on: it is taken for
 * dead (its lock runs out), a second worker process continues the job, and then the first one's held
 * writes arrive. The client sees one coherent reply, the replay stream holds each message once, and the
 * completion is charged once, for what was delivered.
 */
describe("a worker partitioned from Redis and taken for dead", () => {
  let upstream: CountingUpstream;
  let platform: TestPlatform;
  let proxy: TcpProxy;
  const workers: ChildProcess[] = [];
  const logs: string[] = [];

  beforeAll(async () => {
    upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 50, promptTokens: PROMPT_TOKENS });
    const model = countingModel(upstream, { id: MODEL, maxConcurrency: 8, continueFinalMessage: true });
    platform = await startTestPlatform({ startWorker: false, models: () => [model], env: { JOB_IDLE_TIMEOUT_MS: "45000" } });
    const redis = new URL(TEST_REDIS_URL);
    proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  }, 60_000);

  afterAll(async () => {
    await proxy?.setMode("pass");
    for (const worker of workers) {
      worker.kill("SIGKILL");
      await exited(worker);
    }
    await proxy?.close();
    await platform?.close();
    await upstream?.close();
  });

  it("the client gets one generation, the stream holds each message once, and the completion is charged once", async () => {
    workers.push(spawnWorker(platform, logs, undefined, [], { REDIS_URL: proxy.rewrite(TEST_REDIS_URL) }));
    const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
    await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);

    const { key } = await platform.createKey();
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Count." }], stream: true, stream_options: { include_usage: true } }),
    });
    expect(response.status).toBe(200);
    const completionId = response.headers.get("x-completion-id")!;
    const events: { id: number | null; data: string }[] = [];
    let text = "";
    const done = (async () => {
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const piece of response.body!) {
        buffer += decoder.decode(piece as Uint8Array, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const id = /^id: (\d+)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (data === undefined) continue;
          events.push({ id: id === undefined ? null : Number(id), data });
          if (data !== "[DONE]") text += JSON.parse(data).choices?.[0]?.delta?.content ?? "";
        }
      }
    })();
    await eventually(async () => (text.length >= 3 * 10 ? true : undefined), 30_000);

    // The partition: the first worker's Redis traffic is held; its engine goes on. A second worker takes the job over.
    await proxy.setMode("hold");
    workers.push(spawnWorker(platform, logs));
    await done;
    // The partition heals: the first worker's held writes (and its reconnection's re-sent ones) reach Redis.
    await proxy.setMode("pass");
    await new Promise((resolve) => setTimeout(resolve, 3_000));

    expect(events.at(-1)?.data).toBe("[DONE]");
    const chunks = events.slice(0, -1);
    expect(chunks.map((e) => e.id)).toEqual(chunks.map((_, i) => i + 1));
    expect(text).toBe(countingReply(TOKENS));
    expect(JSON.parse(chunks.at(-1)!.data).usage).toEqual({ prompt_tokens: PROMPT_TOKENS, completion_tokens: TOKENS, total_tokens: PROMPT_TOKENS + TOKENS });
    expect(upstream.requests.filter((r) => r.continued)).toHaveLength(1);

    const stream = new InferenceKeys(platform.testRedis.prefix).replayStream(completionId);
    const messages = decodeReplayEntries(await platform.testRedis.redis.xrange(stream, "-", "+"));
    expect(messages.map((m) => m.seq)).toEqual(messages.map((_, i) => i));
    const charged = await completionEvents(platform.deps.pool, completionId);
    expect(charged).toHaveLength(1);
    expect(charged[0]!.data).toMatchObject({ promptTokens: PROMPT_TOKENS, completionTokens: TOKENS });
  }, 90_000);
});
