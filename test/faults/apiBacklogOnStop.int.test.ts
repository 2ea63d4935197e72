import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countingModel } from "./countingUpstream.ts";
import { type RoleFixture, roleEnv, startApiRole, startRoleFixture } from "./roleProcesses.ts";

/**
 * An API process told to stop (SIGTERM) right after a burst of connections: those its event loop had not
 * accepted yet were reset by the kernel when it closed its listener at once (a probe: 87 of 150 streamed
 * chats got no answer at all). It accepts them for a moment first, and each gets an answer.
 */
let fixture: RoleFixture;
beforeAll(async () => {
  fixture = await startRoleFixture("api-backlog");
}, 60_000);
afterAll(async () => {
  await fixture?.stop();
}, 60_000);

/** Opens a connection and sends one request at once; answers whether any response came before the connection ended. */
function requestOnce(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let answered = false;
    socket.on("connect", () => socket.write("GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"));
    socket.on("data", () => {
      answered = true;
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(answered));
    socket.setTimeout(20_000, () => socket.destroy());
  });
}

describe("an API process stopped right after a burst of connections", () => {
  it("answers every connection that reached it, none reset unanswered", async () => {
    const { dir, db, redis, logs, children } = fixture;
    const env = await roleEnv({
      dir,
      databaseUrl: db.url,
      redisUrl: redis.url,
      prefix: `test-backlog-${process.pid}`,
      models: [countingModel({ baseUrl: "http://127.0.0.1:9/v1" }, { id: "unused", maxConcurrency: 1 })],
      extra: { SHUTDOWN_GRACE_MS: "8000" },
    });
    const { api, child } = await startApiRole(env, logs, children).catch((error: unknown) => {
      throw new Error(`start: ${logs.join("").slice(-2000)}`, { cause: error });
    });
    const port = Number(new URL(api).port);
    const burst = Array.from({ length: 300 }, () => requestOnce(port));
    child.kill("SIGTERM");
    const answered = await Promise.all(burst);
    expect(answered.filter((a) => !a).length, logs.join("")).toBe(0);
  }, 60_000);
});
