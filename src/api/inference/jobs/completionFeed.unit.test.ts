import { describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import { CompletionFeed } from "./completionFeed.ts";

const delta = (seq: number): DeltaMessage => ({ seq, type: "delta", delta: { content: `t${seq}` } });
const usage = (seq: number): DeltaMessage => ({ seq, type: "usage", usage: { promptTokens: 1, completionTokens: seq, reasoningTokens: 0 } });
const RECOVERY = { retryMs: 20, windowMs: 300 };
/** Far beyond every bound below: a feed that waits for it hangs. */
const IDLE_MS = 60_000;

/** A replay stream to refill from: `away` makes reads fail (Redis not back yet). */
function replayStream(messages: DeltaMessage[] = []) {
  const stream = { messages, away: false, reads: 0 };
  const refill = async () => {
    stream.reads++;
    if (stream.away) throw new Error("Connection is closed.");
    return [...stream.messages];
  };
  return { stream, refill };
}

async function within<T>(ms: number, promise: Promise<T>): Promise<T | "timed out"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timed out">((resolve) => {
    timer = setTimeout(() => resolve("timed out"), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe("CompletionFeed after messages were missed", () => {
  it("fills a gap once the replay stream can be read, though its first read failed", async () => {
    const { stream, refill } = replayStream([delta(1), delta(2), usage(3)]);
    stream.away = true;
    const feed = new CompletionFeed("c", refill, () => undefined, RECOVERY);
    feed.push(delta(0));
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    feed.push(usage(3)); // 1 and 2 were missed: a gap; the read fails (Redis still away)
    const next = feed.next(IDLE_MS);
    await new Promise((r) => setTimeout(r, 50));
    stream.away = false;
    expect(await within(2_000, next)).toEqual(delta(1));
    expect(await feed.next(IDLE_MS)).toEqual(delta(2));
    expect(await feed.next(IDLE_MS)).toEqual(usage(3));
  });

  it("after the subscriber reconnected, reads the replay stream though no later message shows a gap", async () => {
    const { stream, refill } = replayStream([delta(0)]);
    const feed = new CompletionFeed("c", refill, () => undefined, RECOVERY);
    feed.push(delta(0));
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    feed.recover();
    const next = feed.next(IDLE_MS);
    // The worker's last messages reach the stream only after the subscriber is back (missed live).
    await new Promise((r) => setTimeout(r, 60));
    stream.messages.push(delta(1), usage(2));
    expect(await within(2_000, next)).toEqual(delta(1));
    expect(await feed.next(IDLE_MS)).toEqual(usage(2));
  });

  it("is lost, and says so at once, when the replay stream cannot fill the gap", async () => {
    const { refill } = replayStream([delta(3), usage(4)]);
    const feed = new CompletionFeed("c", refill, () => undefined, RECOVERY);
    feed.push(delta(0));
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    feed.push(delta(3));
    expect(await within(2_000, feed.next(IDLE_MS))).toBeUndefined();
    expect(feed.lost).toBe(true);
    expect(feed.closed).toBe(false);
  });

  it("is lost at the first read that finds the gap behind a later message of the stream (no wait for the window)", async () => {
    // Redis restarted empty: the stream holds what the worker wrote since, from 3 on; 1 and 2 are gone.
    const { stream, refill } = replayStream([delta(3), delta(4)]);
    const feed = new CompletionFeed("c", refill, () => undefined, { retryMs: 20, windowMs: IDLE_MS });
    feed.push(delta(0));
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    feed.push(delta(4));
    expect(await within(2_000, feed.next(IDLE_MS))).toBeUndefined();
    expect(feed.lost).toBe(true);
    expect(stream.reads).toBe(1);
  });

  it("with lostAtOnce false (a batch line's), waits the window out before it is lost", async () => {
    const { stream, refill } = replayStream([delta(3), delta(4)]);
    const feed = new CompletionFeed("c", refill, () => undefined, { retryMs: 20, windowMs: 300, lostAtOnce: false });
    feed.push(delta(0));
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    feed.push(delta(4));
    // The first read shows the gap behind 3 and 4: not lost yet.
    while (stream.reads === 0) await new Promise((r) => setTimeout(r, 5));
    expect(feed.lost).toBe(false);
    expect(await within(2_000, feed.next(IDLE_MS))).toBeUndefined();
    expect(feed.lost).toBe(true);
    expect(stream.reads).toBeGreaterThan(1);
  });

  it("is not lost at once before its first message: the stream may hold what an earlier run under the same id left (a batch line run again)", async () => {
    const { stream, refill } = replayStream([delta(3), delta(4)]);
    const feed = new CompletionFeed("c", refill, () => undefined, { retryMs: 20, windowMs: IDLE_MS });
    // Nothing came before the start timeout: one read of the stream, which holds an earlier run's tail.
    expect(await feed.next(50)).toBeUndefined();
    expect(stream.reads).toBe(1);
    expect(feed.lost).toBe(false);
    // This run's own messages then come, from 0.
    feed.push({ seq: 0, type: "started" });
    expect(await within(2_000, feed.next(IDLE_MS))).toEqual({ seq: 0, type: "started" });
    feed.close();
  });

  it("is not lost while the stream holds nothing after the gap: the worker may write the missing messages once it is back", async () => {
    // Redis restarted empty and the worker is not back yet: the gap may still be filled.
    const { stream, refill } = replayStream([]);
    const feed = new CompletionFeed("c", refill, () => undefined, { retryMs: 20, windowMs: IDLE_MS });
    feed.push(delta(0));
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    feed.recover();
    const next = feed.next(IDLE_MS);
    await new Promise((r) => setTimeout(r, 100));
    expect(feed.lost).toBe(false);
    stream.messages.push(delta(1), delta(2), usage(3));
    expect(await within(2_000, next)).toEqual(delta(1));
    expect(await feed.next(IDLE_MS)).toEqual(delta(2));
    expect(await feed.next(IDLE_MS)).toEqual(usage(3));
    feed.close();
  });

  it("stops reading once the gap is filled and the reconnect window passed", async () => {
    const { stream, refill } = replayStream([delta(0), delta(1)]);
    const feed = new CompletionFeed("c", refill, () => undefined, RECOVERY);
    feed.recover();
    expect(await feed.next(IDLE_MS)).toEqual(delta(0));
    await new Promise((r) => setTimeout(r, RECOVERY.windowMs + 100));
    const reads = stream.reads;
    await new Promise((r) => setTimeout(r, 100));
    expect(stream.reads).toBe(reads);
    feed.close();
  });
});
