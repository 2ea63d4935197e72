import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { LocalReplyChannels } from "../../src/contracts/localReplyChannels.ts";
import type { ReplyEntry } from "../../src/contracts/replyBatch.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { type TurnMessage, TurnWriter } from "../../workers/completion/turnWriter.ts";
import { eventually } from "../support/eventually.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

/**
 * The TurnWriter of a process whose API role listens on a reply channel (LocalReplyChannels): that
 * channel's messages are handed over as objects, once Redis acknowledged their appends, and never
 * published; other channels are published as before.
 */
describe("TurnWriter with reply channels of its own process", () => {
  let testRedis: TestRedis;
  let connection: Redis;
  let listener: Redis;
  let local: LocalReplyChannels;
  let writer: TurnWriter;
  /** What the local channel was handed, one array per call. */
  let handed: ReplyEntry[][];
  let published: [string, string][];
  const key = (name: string) => `${testRedis.prefix}:${name}`;
  const noFailure = (error: Error): void => {
    throw new Error(`unexpected write failure: ${error.message}`);
  };
  const turnMessage = (
    stream: string,
    replyTo: string,
    completionId: string,
    message: DeltaMessage,
    onFailure: (error: Error) => void = noFailure,
  ): TurnMessage => ({
    stream: key(stream),
    maxLen: 100,
    expireSeconds: null,
    replyTo: key(replyTo),
    completionId,
    message,
    messageJson: JSON.stringify(message),
    onFailure,
  });
  const streamOf = async (stream: string) => (await testRedis.redis.xrange(key(stream), "-", "+")).map(([, fields]) => JSON.parse(fields[1]!));

  beforeAll(async () => {
    testRedis = await createTestRedis();
    connection = createRedis(TEST_REDIS_URL, { kind: "worker" });
    listener = createRedis(TEST_REDIS_URL, { kind: "subscriber" });
    listener.on("message", (channel: string, text: string) => published.push([channel, text]));
    local = new LocalReplyChannels();
    local.register(key("api-local"), (entries) => handed.push([...entries]));
    await listener.subscribe(key("api-local"), key("api-remote"));
    writer = new TurnWriter(connection, local);
  });
  afterAll(async () => {
    connection?.disconnect();
    listener?.disconnect();
    await testRedis?.close();
  });

  it("hands a turn's messages for its own process over as they are, in one call, and publishes only another process's", async () => {
    handed = [];
    published = [];
    const started: DeltaMessage = { seq: 0, type: "started" };
    const delta: DeltaMessage = { seq: 1, type: "delta", delta: { content: "Hi" }, tokens: 1 };
    const other: DeltaMessage = { seq: 0, type: "started" };
    await Promise.all([
      writer.write(turnMessage("s1", "api-local", "c1", started)),
      writer.write(turnMessage("s2", "api-remote", "c2", other)),
      writer.write(turnMessage("s1", "api-local", "c1", delta)),
    ]);
    // Handed over by the time the turn settled: the very objects written, in order, in one call.
    expect(handed).toHaveLength(1);
    expect(handed[0]!.map((e) => e.completionId)).toEqual(["c1", "c1"]);
    expect(handed[0]![0]!.message).toBe(started);
    expect(handed[0]![1]!.message).toBe(delta);
    expect(await streamOf("s1")).toEqual([started, delta]);
    await eventually(async () => (published.length ? true : undefined), 5_000);
    // Give a stray PUBLISH on the local channel time to arrive: none may.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(published).toEqual([[key("api-remote"), '[["c2",{"seq":0,"type":"started"}]]']]);
  });

  it("does not hand over a message whose append failed; the turn's other messages are handed over in order", async () => {
    handed = [];
    published = [];
    await testRedis.redis.set(key("not-a-stream"), "x");
    const failures: Error[] = [];
    const first: DeltaMessage = { seq: 0, type: "started" };
    const lostOne: DeltaMessage = { seq: 0, type: "started" };
    const last: DeltaMessage = { seq: 1, type: "finish", finishReason: "stop" };
    await Promise.all([
      writer.write(turnMessage("good", "api-local", "good", first)),
      writer.write(turnMessage("not-a-stream", "api-local", "bad", lostOne, (error) => void failures.push(error))),
      writer.write(turnMessage("good", "api-local", "good", last)),
    ]);
    expect(failures.map((e) => e.message)).toEqual([expect.stringContaining("WRONGTYPE")]);
    expect(handed).toEqual([
      [
        { completionId: "good", message: first },
        { completionId: "good", message: last },
      ],
    ]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(published).toEqual([]);
  });

  describe("while Redis does not answer", () => {
    let proxy: TcpProxy;
    let proxied: Redis;
    let proxiedWriter: TurnWriter;

    beforeAll(async () => {
      const target = new URL(TEST_REDIS_URL);
      proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
      proxied = createRedis(proxy.rewrite(TEST_REDIS_URL), { kind: "worker" });
      await proxied.ping();
      proxiedWriter = new TurnWriter(proxied, local);
    });
    afterAll(async () => {
      proxied?.disconnect();
      await proxy?.close();
    });

    it("hands nothing over before Redis acknowledged the appends; then hands the turns over in order", async () => {
      handed = [];
      published = [];
      await proxy.setMode("blackhole");
      const started: DeltaMessage = { seq: 0, type: "started" };
      const delta: DeltaMessage = { seq: 1, type: "delta", delta: { content: "late" } };
      const firstTurn = proxiedWriter.write(turnMessage("held", "api-local", "held", started));
      await new Promise((resolve) => setImmediate(resolve));
      const secondTurn = proxiedWriter.write(turnMessage("held", "api-local", "held", delta));
      await new Promise((resolve) => setTimeout(resolve, 300));
      // The appends went nowhere: nothing is handed over (the client would be ahead of the replay stream).
      expect(handed).toEqual([]);
      expect(await testRedis.redis.exists(key("held"))).toBe(0);
      // The connection is reset: the worker connection sends its unanswered commands again.
      await proxy.setMode("pass");
      proxy.reset();
      await Promise.all([firstTurn, secondTurn]);
      expect(await streamOf("held")).toEqual([started, delta]);
      expect(handed).toEqual([[{ completionId: "held", message: started }], [{ completionId: "held", message: delta }]]);
      expect(published).toEqual([]);
    });
  });
});
