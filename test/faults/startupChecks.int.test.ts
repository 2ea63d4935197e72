import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkPostgres, checkRedis, DependencyUnavailableError } from "../../src/runtime/checkDependencies.ts";

/**
 * The start-up checks against a dependency that accepts connections and never says a word (a wrong
 * port forwarded to something silent, a frozen server): each fails within its 3 s deadline, naming the
 * dependency, instead of waiting for ever.
 */
let silent: Server;
let port: number;
const sockets = new Set<Socket>();

beforeAll(async () => {
  silent = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  port = (silent.address() as { port: number }).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

describe("start-up checks against a silent server", () => {
  it("fails the Redis check within about 3 s, saying Redis does not answer", async () => {
    const started = performance.now();
    const error = await checkRedis(`redis://127.0.0.1:${port}`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toMatch(/^Redis is not answering at redis:\/\/127\.0\.0\.1:\d+\/? \(no answer within 3 s\)/);
    expect(performance.now() - started).toBeLessThan(6_000);
  }, 15_000);

  it("fails the PostgreSQL check within about 3 s, saying PostgreSQL does not answer", async () => {
    const started = performance.now();
    const error = await checkPostgres(`postgres://postgres@127.0.0.1:${port}/nothing`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toMatch(/^PostgreSQL is not answering/);
    expect(performance.now() - started).toBeLessThan(6_000);
  }, 15_000);
});
