import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedis, duplicateAs, type Redis } from "../../src/redis/createRedis.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";

/**
 * The platform's Redis connections send no CLIENT SETINFO when they connect: Redis before 7.2 refuses it,
 * which made an error span of every connection a follower of a running completion opens. Counted on a
 * private redis-server (nobody else's errors), from its error statistics (a refused subcommand shows in no
 * command statistics nor in MONITOR).
 */
describe("Redis connections on connect", () => {
  let server: RedisServer;
  let admin: IORedis;
  beforeAll(async () => {
    server = await startRedisServer();
    await server.start();
    admin = new IORedis(server.url, { disableClientInfo: true });
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  /**
   * CLIENT SETINFO calls the server saw: refused by Redis before 7.2 (each an error reply, in no command
   * statistics nor in MONITOR), counted among its commands from 7.2 on.
   */
  const setinfoSeen = async (): Promise<number> => {
    const errors = await admin.info("errorstats");
    const refused = [...errors.matchAll(/errorstat_[A-Z]+:count=(\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0);
    const commands = await admin.info("commandstats");
    const served = Number(/cmdstat_client\|setinfo:calls=(\d+)/.exec(commands)?.[1] ?? 0);
    return refused + served;
  };

  it("send no CLIENT SETINFO, for every kind and for a duplicate", async () => {
    await admin.config("RESETSTAT");
    const before = await setinfoSeen();
    const opened: Redis[] = [];
    for (const kind of ["fail-fast", "subscriber", "worker"] as const) opened.push(createRedis(server.url, { kind }));
    opened.push(duplicateAs(opened[0]!, "subscriber"));
    for (const redis of opened) await redis.ping();
    expect(await setinfoSeen()).toBe(before);
    // What the check sees: a client that does send it.
    const plain = new IORedis(server.url);
    await plain.ping();
    expect(await setinfoSeen()).toBeGreaterThan(before);
    plain.disconnect();
    for (const redis of opened) redis.disconnect();
  });
});
