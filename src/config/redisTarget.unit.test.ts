import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";
import { describeRedisTarget, parseRedisNodes } from "../redis/redisTarget.ts";

describe("parseRedisNodes", () => {
  it("reads host:port lists, with spaces, empty entries and bracketed IPv6 hosts", () => {
    expect(parseRedisNodes("10.0.0.1:7000, redis-b:7001,,[::1]:7002")).toEqual([
      { host: "10.0.0.1", port: 7000 },
      { host: "redis-b", port: 7001 },
      { host: "::1", port: 7002 },
    ]);
  });

  it.each(["redis-a", "redis-a:", ":7000", "redis-a:0", "redis-a:65536", "redis-a:70000", "redis://a:7000", "a:7000:1", " , "])('refuses "%s"', (list) => {
    expect(() => parseRedisNodes(list)).toThrow(/host:port/);
  });
});

describe("the Redis target of the configuration", () => {
  it("is the single server of REDIS_URL by default", () => {
    expect(loadConfig({}).redis).toEqual({ mode: "single", url: "redis://127.0.0.1:6379" });
    expect(loadConfig({ REDIS_URL: "rediss://u:secret@cache:6380/2" }).redis).toEqual({ mode: "single", url: "rediss://u:secret@cache:6380/2" });
  });

  it("is a cluster with REDIS_CLUSTER_NODES, with the credentials and TLS of REDIS_USERNAME, REDIS_PASSWORD and REDIS_TLS", () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: "a:7000,b:7001", REDIS_USERNAME: "app", REDIS_PASSWORD: "pw", REDIS_TLS: "true" });
    expect(config.redis).toEqual({
      mode: "cluster",
      nodes: [
        { host: "a", port: 7000 },
        { host: "b", port: 7001 },
      ],
      username: "app",
      password: "pw",
      tls: true,
    });
    expect(describeRedisTarget(config.redis)).toBe("Redis Cluster a:7000,b:7001");
  });

  it("is a Sentinel-managed master with REDIS_SENTINELS and REDIS_SENTINEL_NAME", () => {
    const config = loadConfig({ REDIS_SENTINELS: "s1:26379,s2:26379", REDIS_SENTINEL_NAME: "mymaster", REDIS_SENTINEL_PASSWORD: "spw" });
    expect(config.redis).toEqual({
      mode: "sentinel",
      sentinels: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26379 },
      ],
      name: "mymaster",
      sentinelPassword: "spw",
      tls: false,
    });
    expect(describeRedisTarget(config.redis)).not.toContain("spw");
  });

  it("refuses a Sentinel without a master name, both a cluster and Sentinel, bad node lists and a prefix with braces", () => {
    expect(() => loadConfig({ REDIS_SENTINELS: "s1:26379" })).toThrow(/REDIS_SENTINEL_NAME/);
    expect(() => loadConfig({ REDIS_SENTINELS: "s1:26379", REDIS_SENTINEL_NAME: "m", REDIS_CLUSTER_NODES: "a:7000" })).toThrow(ConfigError);
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: "a" })).toThrow(/REDIS_CLUSTER_NODES/);
    expect(() => loadConfig({ REDIS_TLS: "yes" })).toThrow(/REDIS_TLS/);
    expect(() => loadConfig({ REDIS_PREFIX: "{inference}" })).toThrow(/REDIS_PREFIX/);
    expect(loadConfig({ REDIS_PREFIX: "" }).redisPrefix).toBe("inference");
  });

  it("refuses REDIS_URL beside a cluster or Sentinel (it was ignored without a word), but a blank one is unset", () => {
    expect(() => loadConfig({ REDIS_URL: "redis://cache:6379", REDIS_CLUSTER_NODES: "a:7000" })).toThrow(/REDIS_URL and REDIS_CLUSTER_NODES: set one of them/);
    expect(() => loadConfig({ REDIS_URL: "redis://cache:6379", REDIS_SENTINELS: "s1:26379", REDIS_SENTINEL_NAME: "m" })).toThrow(
      /REDIS_URL and REDIS_SENTINELS/,
    );
    expect(loadConfig({ REDIS_URL: " ", REDIS_CLUSTER_NODES: "a:7000" }).redis.mode).toBe("cluster");
  });

  it("never shows a single server's password", () => {
    expect(describeRedisTarget({ mode: "single", url: "redis://u:secret@cache:6379" })).toBe("redis://u:***@cache:6379");
  });
});
