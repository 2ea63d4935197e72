import { describe, expect, it } from "vitest";
import { isRedisUnavailable } from "./redisUnavailable.ts";

const named = (name: string, message: string, extra: object = {}) => Object.assign(new Error(message), { name }, extra);

describe("isRedisUnavailable", () => {
  it("recognises ioredis's and BullMQ's connection failures and timeouts", () => {
    for (const error of [
      named("MaxRetriesPerRequestError", "Reached the max retries per request limit (which is 0)."),
      named("AbortError", "Command aborted due to connection close", { command: { name: "evalsha", args: [] } }),
      named("ConnectionClosedError", "Connection is closed."),
      new Error("Stream isn't writeable and enableOfflineQueue options is false"),
      new Error("Command timed out"),
      new Error("Connection is closed."),
      new Error("Cluster isn't ready and enableOfflineQueue options is false"),
      new Error("None of startup nodes is available"),
      new Error("Too many Cluster redirections. Last error: Error: Connection is closed."),
      named("ClusterAllFailedError", "Failed to refresh slots cache."),
    ]) {
      expect(isRedisUnavailable(error), error.message).toBe(true);
    }
  });

  it("leaves Redis's error replies and other aborts alone", () => {
    expect(isRedisUnavailable(named("ReplyError", "WRONGTYPE Operation against a key holding the wrong kind of value"))).toBe(false);
    expect(isRedisUnavailable(named("AbortError", "This operation was aborted"))).toBe(false);
    expect(isRedisUnavailable(new Error("boom"))).toBe(false);
    expect(isRedisUnavailable(null)).toBe(false);
  });
});
