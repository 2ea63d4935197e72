import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { LocalReplyChannels } from "../../src/contracts/localReplyChannels.ts";
import { CoalescingWindow } from "../../workers/completion/coalescingWindow.ts";
import { DeltaPublisher } from "../../workers/completion/deltaPublisher.ts";
import { TurnWriter } from "../../workers/completion/turnWriter.ts";
import { duplicateAs } from "../../src/redis/createRedis.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";

describe("DeltaPublisher -> Redis -> DeltaSubscriber", () => {
  let testRedis: TestRedis;
  let keys: InferenceKeys;
  let subscriber: DeltaSubscriber;
  let writer: TurnWriter;
  const job = (completionId: string) => ({ completionId, replyTo: subscriber.replyTo });
  beforeAll(async () => {
    testRedis = await createTestRedis();
    keys = new InferenceKeys(testRedis.prefix);
    subscriber = new DeltaSubscriber(testRedis.redis, keys);
    await subscriber.ready;
    writer = new TurnWriter(testRedis.redis);
  });
  afterAll(async () => {
    await subscriber?.close();
    await testRedis?.close();
  });

  it("sends the first delta at once, merges the later ones of the window, and keeps order and replay", async () => {
    const feed = subscriber.open("c1");
    let clock = 1000;
    const publisher = new DeltaPublisher(keys, job("c1"), {
      window: new CoalescingWindow(60_000),
      writer,
      replayTtlSeconds: 60,
      replayMaxLen: 100,
      now: () => clock,
    });
    publisher.send({ type: "started" });
    publisher.delta({ content: "Hel" });
    clock += 1;
    publisher.delta({ content: "lo", toolCalls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{" } }] });
    publisher.delta({ content: " world", toolCalls: [{ index: 0, function: { arguments: "}" } }] });
    publisher.send({ type: "finish", finishReason: "stop" });
    publisher.send({ type: "usage", usage: { promptTokens: 3, completionTokens: 3, reasoningTokens: 0 } });
    await publisher.close();

    const received = [];
    for (;;) {
      const message = await feed.next(5_000);
      if (!message) throw new Error("feed ended early");
      received.push(message);
      if (message.type === "usage") break;
    }
    expect(received).toEqual([
      { seq: 0, type: "started" },
      { seq: 1, type: "delta", delta: { content: "Hel" } },
      {
        seq: 2,
        type: "delta",
        delta: { content: "lo world", toolCalls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }] },
      },
      { seq: 3, type: "finish", finishReason: "stop" },
      { seq: 4, type: "usage", usage: { promptTokens: 3, completionTokens: 3, reasoningTokens: 0 } },
    ]);
    expect(await subscriber.replay("c1")).toEqual(received);
    const ttl = await testRedis.redis.ttl(keys.replayStream("c1"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
    feed.close();
    expect(subscriber.listening).toBe(0);
  });

  it("writes a delta at once when its completion wrote nothing for a whole window (no wait for the flush loop)", async () => {
    const feed = subscriber.open("slow");
    let clock = 1000;
    // The flush loop's timer is a minute away: only an immediate write can deliver the later deltas.
    const window = new CoalescingWindow(60_000);
    const publisher = new DeltaPublisher(keys, job("slow"), { window, writer, replayTtlSeconds: 60, replayMaxLen: 100, now: () => clock });
    publisher.send({ type: "started" });
    publisher.delta({ content: "a" });
    clock += 60_000;
    publisher.delta({ content: "b" });
    clock += 1;
    publisher.delta({ content: "c" });
    const received = [];
    for (let i = 0; i < 3; i++) received.push(await feed.next(2_000));
    expect(received).toEqual([
      { seq: 0, type: "started" },
      { seq: 1, type: "delta", delta: { content: "a" } },
      { seq: 2, type: "delta", delta: { content: "b" } },
    ]);
    // "c" came within the window of "b": it waits (merged) for the flush loop or close().
    expect(await feed.next(100)).toBeUndefined();
    await publisher.close();
    expect(await feed.next(2_000)).toEqual({ seq: 3, type: "delta", delta: { content: "c" } });
    feed.close();
  });

  it("flushes the later deltas of every completion from the worker's one flush loop, without a terminal message", async () => {
    const window = new CoalescingWindow(1);
    const ids = ["loop-a", "loop-b"];
    const feeds = ids.map((id) => subscriber.open(id));
    const publishers = ids.map((id) => new DeltaPublisher(keys, job(id), { window, writer, replayTtlSeconds: 60, replayMaxLen: 100 }));
    for (const [i, publisher] of publishers.entries()) {
      publisher.send({ type: "started" });
      publisher.delta({ content: `first-${i}` });
      publisher.delta({ content: " second" });
      publisher.delta({ content: " third" });
    }
    for (const [i, feed] of feeds.entries()) {
      const received = [];
      let text = "";
      while (text !== `first-${i} second third`) {
        const message = await feed.next(5_000);
        if (!message) throw new Error("the flush loop did not write the pending deltas");
        received.push(message);
        if (message.type === "delta") text += message.delta.content ?? "";
      }
      expect(received[0]).toEqual({ seq: 0, type: "started" });
      expect(received[1]).toEqual({ seq: 1, type: "delta", delta: { content: `first-${i}` } });
      expect(received.map((m) => m.seq)).toEqual(received.map((_, n) => n));
      feed.close();
    }
    await Promise.all(publishers.map((p) => p.close()));
  });

  it("close() rejects when one of its completion's writes failed, and not for another completion's", async () => {
    await testRedis.redis.set(keys.replayStream("broken"), "not a stream");
    const window = new CoalescingWindow(0);
    const broken = new DeltaPublisher(keys, job("broken"), { window, writer, replayTtlSeconds: 60, replayMaxLen: 100 });
    const fine = new DeltaPublisher(keys, job("fine"), { window, writer, replayTtlSeconds: 60, replayMaxLen: 100 });
    for (const publisher of [broken, fine]) publisher.send({ type: "started" });
    await expect(broken.close()).rejects.toThrow(/WRONGTYPE/);
    await expect(fine.close()).resolves.toBeUndefined();
  });

  it("fills a gap in the sequence from the replay stream", async () => {
    const feed = subscriber.open("c2");
    // Messages 0 and 1 reach only the replay stream (as if published while the subscriber reconnected).
    await testRedis.redis.xadd(keys.replayStream("c2"), "*", "m", JSON.stringify({ seq: 0, type: "started" }));
    await testRedis.redis.xadd(keys.replayStream("c2"), "*", "m", JSON.stringify({ seq: 1, type: "delta", delta: { content: "a" } }));
    await testRedis.redis.publish(subscriber.replyTo, JSON.stringify([["c2", { seq: 2, type: "delta", delta: { content: "b" } }]]));
    const seqs: number[] = [];
    for (let i = 0; i < 3; i++) seqs.push((await feed.next(5_000))!.seq);
    expect(seqs).toEqual([0, 1, 2]);
    feed.close();
  });

  it("hands an API of its own process the messages a PUBLISH would bring it (LocalReplyChannels); close() releases its channel", async () => {
    const local = new LocalReplyChannels();
    const own = new DeltaSubscriber(testRedis.redis, keys, { local });
    const localWriter = new TurnWriter(testRedis.redis, local);
    /** One completion's messages through `via`'s writer, as `to`'s feed receives them. */
    const run = async (to: DeltaSubscriber, via: TurnWriter, completionId: string) => {
      const feed = to.open(completionId);
      const publisher = new DeltaPublisher(
        keys,
        { completionId, replyTo: to.replyTo },
        { window: new CoalescingWindow(0), writer: via, replayTtlSeconds: 60, replayMaxLen: 100 },
      );
      publisher.send({ type: "started" });
      publisher.delta({ content: "Hi", tokens: 1, logprobs: [{ token: "Hi", logprob: -0.5, bytes: [72, 105], top_logprobs: [] }] });
      publisher.delta({ toolCalls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }], tokens: 2 });
      publisher.send({ type: "finish", finishReason: "tool_calls" });
      publisher.send({ type: "usage", usage: { promptTokens: 3, completionTokens: 3, reasoningTokens: 0 } });
      await publisher.close();
      const received: DeltaMessage[] = [];
      for (let message = await feed.next(5_000); message; message = message.type === "usage" ? undefined : await feed.next(5_000)) received.push(message);
      feed.close();
      return received;
    };
    try {
      await own.ready;
      expect(local.handlerFor(own.replyTo)).toBeDefined();
      const published = await run(subscriber, writer, "via-publish");
      const handed = await run(own, localWriter, "in-process");
      expect(published).toHaveLength(5);
      expect(handed).toEqual(published);
      expect(await own.replay("in-process")).toEqual(handed);
    } finally {
      await own.close();
    }
    expect(local.handlerFor(own.replyTo)).toBeUndefined();
  });

  it("sends what is written in one event-loop turn for one API process as one PUBLISH, and only to that process", async () => {
    const other = new DeltaSubscriber(testRedis.redis, keys);
    const raw = duplicateAs(testRedis.redis, "subscriber");
    try {
      await other.ready;
      const payloads: string[] = [];
      raw.on("message", (_channel: string, text: string) => payloads.push(text));
      await raw.subscribe(subscriber.replyTo);
      const window = new CoalescingWindow(0);
      const mine = ["turn-a", "turn-b", "turn-c"].map((id) => ({ id, feed: subscriber.open(id) }));
      const theirs = other.open("turn-x");
      const publishers = mine.map(({ id }) => new DeltaPublisher(keys, job(id), { window, writer, replayTtlSeconds: 60, replayMaxLen: 100 }));
      const foreign = new DeltaPublisher(keys, { completionId: "turn-x", replyTo: other.replyTo }, { window, writer, replayTtlSeconds: 60, replayMaxLen: 100 });
      for (const publisher of [...publishers, foreign]) {
        publisher.send({ type: "started" });
        publisher.delta({ content: "one" });
      }
      await Promise.all([...publishers, foreign].map((p) => p.close()));
      for (const { feed } of mine) {
        expect(await feed.next(5_000)).toEqual({ seq: 0, type: "started" });
        expect(await feed.next(5_000)).toEqual({ seq: 1, type: "delta", delta: { content: "one" } });
        feed.close();
      }
      expect(await theirs.next(5_000)).toEqual({ seq: 0, type: "started" });
      theirs.close();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(payloads).toHaveLength(1);
      expect((JSON.parse(payloads[0]!) as [string, unknown][]).map(([id]) => id)).toEqual(["turn-a", "turn-a", "turn-b", "turn-b", "turn-c", "turn-c"]);
    } finally {
      raw.disconnect();
      await other.close();
    }
  });
});
