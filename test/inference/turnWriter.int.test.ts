import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { TurnWriter } from "../../workers/completion/turnWriter.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

describe("TurnWriter", () => {
  let testRedis: TestRedis;
  let connection: Redis;
  let listener: Redis;
  let writer: TurnWriter;
  const key = (name: string) => `${testRedis.prefix}:${name}`;
  const noFailure = (error: Error) => {
    throw new Error(`unexpected write failure: ${error.message}`);
  };
  /** A message and its JSON text, as DeltaPublisher hands them to the writer. */
  const json = (message: DeltaMessage) => ({ message, messageJson: JSON.stringify(message) });

  beforeAll(async () => {
    testRedis = await createTestRedis();
    connection = createRedis(TEST_REDIS_URL, { kind: "worker" });
    listener = createRedis(TEST_REDIS_URL, { kind: "subscriber" });
    await connection.ping();
    writer = new TurnWriter(connection);
  });
  afterAll(async () => {
    connection?.disconnect();
    listener?.disconnect();
    await testRedis?.close();
  });

  it("holds a turn's commands in the corked socket and sends them at the end of the turn: the appends, then one PUBLISH per reply channel", async () => {
    const payloads: [string, string][] = [];
    listener.on("message", (channel: string, text: string) => payloads.push([channel, text]));
    await listener.subscribe(key("api-1"), key("api-2"));
    const socket = (connection as Extract<typeof connection, { stream: unknown }>).stream as Socket;

    const done = [
      writer.write({
        stream: key("s1"),
        maxLen: 100,
        expireSeconds: 60,
        replyTo: key("api-1"),
        completionId: "c1",
        ...json({ seq: 0, type: "started" }),
        onFailure: noFailure,
      }),
      writer.write({
        stream: key("s2"),
        maxLen: 100,
        expireSeconds: null,
        replyTo: key("api-1"),
        completionId: "c2",
        ...json({ seq: 0, type: "started" }),
        onFailure: noFailure,
      }),
      writer.write({
        stream: key("s1"),
        maxLen: 100,
        expireSeconds: null,
        replyTo: key("api-1"),
        completionId: "c1",
        ...json({ seq: 1, type: "finish", finishReason: "stop" }),
        onFailure: noFailure,
      }),
      writer.write({
        stream: key("s3"),
        maxLen: 100,
        expireSeconds: null,
        replyTo: key("api-2"),
        completionId: "c3",
        ...json({ seq: 0, type: "started" }),
        onFailure: noFailure,
      }),
    ];
    // Nothing has left yet: the appends wait in the corked socket, the replies in the turn.
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBeGreaterThan(0);
    expect(new Set(done).size).toBe(1);
    await Promise.all(done);
    expect(socket.writableCorked).toBe(0);

    expect((await testRedis.redis.xrange(key("s1"), "-", "+")).map(([, fields]) => fields)).toEqual([
      ["m", '{"seq":0,"type":"started"}'],
      ["m", '{"seq":1,"type":"finish","finishReason":"stop"}'],
    ]);
    expect(await testRedis.redis.xlen(key("s2"))).toBe(1);
    const ttl = await testRedis.redis.ttl(key("s1"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
    expect(await testRedis.redis.ttl(key("s2"))).toBe(-1);

    for (let i = 0; i < 100 && payloads.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(payloads).toEqual([
      [key("api-1"), '[["c1",{"seq":0,"type":"started"}],["c2",{"seq":0,"type":"started"}],["c1",{"seq":1,"type":"finish","finishReason":"stop"}]]'],
      [key("api-2"), '[["c3",{"seq":0,"type":"started"}]]'],
    ]);
  });

  it("reports a failed append only to the message it carried; the turn and the next ones still settle", async () => {
    await testRedis.redis.set(key("not-a-stream"), "x");
    const failures: Record<string, Error[]> = { bad: [], good: [] };
    const failed = writer.write({
      stream: key("not-a-stream"),
      maxLen: 100,
      expireSeconds: null,
      replyTo: key("api-1"),
      completionId: "bad",
      ...json({ seq: 0, type: "started" }),
      onFailure: (e) => failures.bad!.push(e),
    });
    writer.write({
      stream: key("fine"),
      maxLen: 100,
      expireSeconds: null,
      replyTo: key("api-1"),
      completionId: "good",
      ...json({ seq: 0, type: "started" }),
      onFailure: (e) => failures.good!.push(e),
    });
    await failed;
    expect(failures.bad!.map((e) => e.message)).toEqual([expect.stringContaining("WRONGTYPE")]);
    expect(failures.good).toEqual([]);
    await writer.write({
      stream: key("fine"),
      maxLen: 100,
      expireSeconds: null,
      replyTo: key("api-1"),
      completionId: "good",
      ...json({ seq: 0, type: "started" }),
      onFailure: noFailure,
    });
    expect(await testRedis.redis.xlen(key("fine"))).toBe(2);
  });
});
