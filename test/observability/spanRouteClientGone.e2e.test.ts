import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlpReceiver.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

// The API as it runs in production (`node --import src/observability/register.ts`, the http and Koa
// instrumentations loaded), on a private redis-server that is frozen (SIGSTOP) while a client's key is
// checked; the client leaves meanwhile. Its server span ends when the client leaves, before the
// handler does: it must already carry the route's name, not the `/v1{/*rest}` of the key check's guard.
const REGISTER = fileURLToPath(new URL("../../src/observability/register.ts", import.meta.url));
const API_MAIN = fileURLToPath(new URL("../../src/api/main.ts", import.meta.url));

let receiver: OtlpReceiver;
let redis: RedisServer;
let platform: TestPlatform;
let api: ChildProcess;
const log: string[] = [];
let apiUrl = "";

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  redis = await startRedisServer();
  platform = await startTestPlatform({ redisUrl: redis.url });
  const port = await freePort();
  apiUrl = `http://127.0.0.1:${port}`;
  api = spawn(process.execPath, ["--import", REGISTER, API_MAIN], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: platform.db.url,
      REDIS_URL: redis.url,
      REDIS_PREFIX: platform.testRedis.prefix,
      MODELS_CONFIG: path.join(platform.dir, "registry.json"),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      HOST: "127.0.0.1",
      PORT: String(port),
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  api.stderr?.setEncoding("utf8").on("data", (text: string) => log.push(text));
  await eventually(async () => ((await fetch(`${apiUrl}/healthz`).catch(() => null))?.status === 200 ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the API did not come up: ${log.join("")}`, { cause: error });
  });
});

afterAll(async () => {
  redis?.resume();
  if (api && api.exitCode === null && api.signalCode === null) {
    api.kill("SIGKILL");
    await new Promise((resolve) => api.once("exit", resolve));
  }
  await platform?.close();
  await redis?.stop();
  await receiver?.close();
});

describe("the server span of a request whose client leaves during its key check", () => {
  it("is named after the route template", async () => {
    const { key } = await platform.createKey();
    redis.pause();
    try {
      const controller = new AbortController();
      const leaving = fetch(`${apiUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 }),
        signal: controller.signal,
      }).catch(() => null);
      await new Promise((resolve) => setTimeout(resolve, 300));
      controller.abort();
      await leaving;
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      redis.resume();
    }
    // The process exports its spans when it stops (SIGTERM: the SDK's shutdown flushes the batch).
    api.kill("SIGTERM");
    await new Promise((resolve) => api.once("exit", resolve));
    const servers = receiver.spans.filter((span) => span.kind === 2 && span.attributes["http.request.method"] === "POST");
    expect(
      servers.map((span) => span.name),
      log.join(""),
    ).toEqual(["POST /v1/chat/completions"]);
    expect(servers[0]!.attributes["http.route"]).toBe("/v1/chat/completions");
  }, 90_000);
});
