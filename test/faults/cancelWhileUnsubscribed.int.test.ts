import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { JobCancellations, JobCancelledError } from "../../workers/completion/jobCancellations.ts";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";

/**
 * A cancel the API publishes while a worker's subscription is away (a private redis-server restarted
 * empty) is not lost: the worker reads its mark before it charges the job (TrackedJob.caughtUp).
 */
describe("a cancel published while the worker's subscription was away", () => {
  let server: RedisServer;
  let api: Redis;
  let workerCommands: Redis;
  let cancellations: JobCancellations;
  let queues: CompletionQueues;
  const keys = new InferenceKeys(`cancel-away-${process.pid}`);

  beforeAll(async () => {
    server = await startRedisServer();
    api = createRedis(server.url, { kind: "fail-fast" });
    workerCommands = createRedis(server.url, { kind: "worker" });
    cancellations = new JobCancellations(server.url, keys, { commands: workerCommands, graceMs: 200 });
    await cancellations.ready;
    queues = new CompletionQueues(api, keys);
  }, 30_000);
  afterAll(async () => {
    cancellations?.close();
    await queues?.close();
    api?.disconnect();
    workerCommands?.disconnect();
    await server?.stop();
  });

  it("is read once the subscription is back: the job is cancelled with what the client was sent", async () => {
    const tracked = cancellations.track("cmpl-away");
    await server.shutdownNosave();
    await server.start();
    // The API is back first and says the request was lost after message 4; the worker's subscription
    // may not be back yet, so the message itself may reach nobody. (The queue restarted empty has no
    // such job: the cancel is told all the same.)
    await eventually(async () => ((await queues.cancel("m1", "cmpl-away", "lost", 4).catch(() => null)) !== null ? true : undefined), 10_000);
    await tracked.caughtUp();
    expect(tracked.cancelled).toBe(true);
    expect(tracked.reason).toBe("lost");
    expect(tracked.deliveredThroughSeq).toBe(4);
    expect(tracked.signal.reason).toBeInstanceOf(JobCancelledError);
    tracked.done();
  }, 30_000);

  it("costs nothing while the subscription stayed up: no mark is read", async () => {
    await eventually(async () => ((await api.ping().catch(() => null)) === "PONG" && cancellations.subscribed ? true : undefined), 10_000);
    const tracked = cancellations.track("cmpl-steady");
    // A mark without its message (as if the message were lost) is not looked for: the subscription was up.
    await api.set(keys.cancelMark("cmpl-steady"), JSON.stringify({ completionId: "cmpl-steady", reason: "lost", deliveredThroughSeq: 1 }));
    await tracked.caughtUp();
    expect(tracked.cancelled).toBe(false);
    tracked.done();
  });
});
