import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { ApiPresence } from "../../src/contracts/apiPresence.ts";
import { CompletionRecords } from "../../src/api/inference/jobs/completionRecords.ts";
import type { Redis as RedisServer } from "ioredis";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { writeTogetherNow, writeTogetherThisTurn } from "../../src/redis/writeTogether.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

describe("writing a turn's commands together", () => {
  let testRedis: TestRedis;
  let connection: Redis;
  const key = (name: string) => `${testRedis.prefix}:${name}`;

  beforeAll(async () => {
    testRedis = await createTestRedis();
    connection = createRedis(TEST_REDIS_URL, { kind: "fail-fast" });
    await connection.ping();
  });
  afterAll(async () => {
    connection?.disconnect();
    await testRedis?.close();
  });

  it("holds the turn's commands in the corked socket; `last` adds its own before they leave together at the end of the turn", async () => {
    const socket = (connection as RedisServer).stream as Socket;
    const seen: { corked: number; buffered: number }[] = [];
    let lastCommand: Promise<unknown> | undefined;
    writeTogetherThisTurn(connection, () => {
      seen.push({ corked: socket.writableCorked, buffered: socket.writableLength });
      lastCommand = connection.incr(key("n"));
    });
    const first = [connection.set(key("a"), "1"), connection.incr(key("n"))];
    // Nothing has left yet: both commands wait in the corked socket.
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBeGreaterThan(0);
    await Promise.all(first);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.corked).toBe(1);
    expect(seen[0]!.buffered).toBeGreaterThan(0);
    expect(await lastCommand).toBe(2);
    expect(socket.writableCorked).toBe(0);
    expect(await testRedis.redis.get(key("a"))).toBe("1");
  });

  it("writeTogetherNow holds the commands it issues in the corked socket and sends them together when it returns", async () => {
    const socket = (connection as RedisServer).stream as Socket;
    const inside: { corked: number; buffered: number }[] = [];
    const sent = writeTogetherNow(connection, () => {
      const commands = [connection.set(key("now-a"), "1"), connection.set(key("now-b"), "2")];
      inside.push({ corked: socket.writableCorked, buffered: socket.writableLength });
      return commands;
    });
    expect(inside).toEqual([{ corked: 1, buffered: expect.any(Number) }]);
    expect(inside[0]!.buffered).toBeGreaterThan(0);
    expect(socket.writableCorked).toBe(0);
    expect(await Promise.all(sent)).toEqual(["OK", "OK"]);
    expect(await testRedis.redis.mget(key("now-a"), key("now-b"))).toEqual(["1", "2"]);
  });

  it("leaves a connection that is not connected yet alone: `last` runs and the commands wait for the connection as usual", async () => {
    const lazy = createRedis(TEST_REDIS_URL, { kind: "fail-fast", lazyConnect: true });
    try {
      let ran = false;
      writeTogetherThisTurn(lazy, () => {
        ran = true;
      });
      const set = lazy.set(key("lazy"), "yes");
      await new Promise((resolve) => setImmediate(resolve));
      expect(ran).toBe(true);
      expect(await set).toBe("OK");
      expect(await testRedis.redis.get(key("lazy"))).toBe("yes");
    } finally {
      lazy.disconnect();
    }
  });

  it("a completion record is stored whole, with one listener and its expiry", async () => {
    const keys = new InferenceKeys(testRedis.prefix);
    const presence = new ApiPresence(connection, keys);
    await presence.beat("api-1", 60_000);
    const records = new CompletionRecords(connection, keys, 120, { process: "api-1", presence });
    const record = {
      completionId: "chatcmpl-1",
      accountId: "acc-1",
      model: "m",
      endpoint: "chat.completions" as const,
      created: 1,
      reasoning: false,
      replyTo: "r",
    };
    await records.create(record);
    expect(await records.find("chatcmpl-1")).toEqual(record);
    expect(await records.listeners("chatcmpl-1")).toBe(1);
    const ttl = await testRedis.redis.ttl(keys.completionRecord("chatcmpl-1"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(120);
  });
});
