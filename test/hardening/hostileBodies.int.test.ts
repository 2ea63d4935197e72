import { Worker } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKeySecret } from "../../src/api/keys/apiKeySecret.ts";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/** The default body limit (4 MiB): every hostile body below is just under it. */
const BODY_BYTES = 4 * 1024 * 1024 - 64;

let app: TestApp;
let account: TestAccount;
let key: string;
beforeAll(async () => {
  app = await startTestApp({ env: { MAX_REQUEST_BODY_BYTES: String(4 * 1024 * 1024) } });
  account = await createTestAccount(app.db.pool);
  key = (await createKey(app, account.sessionToken)).key;
});
afterAll(async () => {
  await app?.close();
});

/** `{"model":..,"messages":..,"x":[{},{},...]}` of about `bytes` bytes: over a million tiny objects, costly to parse. */
function manyObjects(bytes: number): Buffer {
  const head = '{"model":"m","messages":[{"role":"user","content":"hi"}],"x":[';
  const count = Math.floor((bytes - head.length - 4) / 3);
  return Buffer.from(`${head}${"{},".repeat(count)}{}]}`);
}

/** A well-formed chat request of about `bytes` bytes: one long prompt, as cheap to parse as JSON gets. */
function longPrompt(bytes: number): Buffer {
  const head = '{"model":"m","messages":[{"role":"user","content":"';
  return Buffer.from(`${head}${"x".repeat(bytes - head.length - 4)}"}]}`);
}

/** A chat request whose response_format schema has `count` properties. */
function wideSchema(count: number): Buffer {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) properties[`p${i}`] = { type: "string" };
  const schema = { type: "object", properties };
  return Buffer.from(
    JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], response_format: { type: "json_schema", json_schema: { name: "x", schema } } }),
  );
}

/** A chat request whose only message carries `count` unknown fields. */
function unknownFields(count: number): Buffer {
  const message: Record<string, unknown> = { role: "user", content: "hi" };
  for (let i = 0; i < count; i++) message[`field_${i}`] = 0;
  return Buffer.from(JSON.stringify({ model: "m", messages: [message] }));
}

/** A tool whose parameters nest `depth` levels deep. */
function deepSchema(depth: number): Buffer {
  const parameters = `${'{"type":"object","properties":{"a":'.repeat(depth)}{"type":"string"}${"}}".repeat(depth)}`;
  return Buffer.from(
    `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${parameters}}}]}`,
  );
}

type RawAnswer = { status: number; body: string };
type Attack = { path: string; headers: Record<string, string>; body: Uint8Array };

/**
 * The attacking clients, on a thread of their own (as on another machine: their sockets' work is not
 * the server's event loop). Each request has a socket of its own (`Connection: close`) and writes its
 * whole body at once, as a client that does not read before it has sent does; the answer is read when
 * the server closes. `rounds` times every attack at once.
 */
const ATTACKER = String.raw`
const { parentPort, workerData } = require("node:worker_threads");
const { connect } = require("node:net");
function post(port, { path, headers, body }) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (data) => { received += data; });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const at = received.indexOf("\r\n\r\n");
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]), body: at < 0 ? "" : received.slice(at + 4) });
    });
    const all = { host: "127.0.0.1", "content-type": "application/json", "content-length": String(body.length), connection: "close", ...headers };
    socket.write("POST " + path + " HTTP/1.1\r\n" + Object.entries(all).map(([n, v]) => n + ": " + v).join("\r\n") + "\r\n\r\n");
    socket.write(body);
  });
}
(async () => {
  const answers = [];
  for (let round = 0; round < workerData.rounds; round++) {
    answers.push(...(await Promise.all(workerData.attacks.map((attack) => post(workerData.port, attack)))));
  }
  parentPort.postMessage(answers);
})();
`;

function attack(attacks: Attack[], rounds: number): Promise<RawAnswer[]> {
  const worker = new Worker(ATTACKER, { eval: true, workerData: { port: Number(new URL(app.baseUrl).port), attacks, rounds } });
  return new Promise<RawAnswer[]>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  }).finally(() => worker.terminate());
}

/** Latencies of GET /healthz, one after the other with a short pause, until `until` settles. */
async function healthLatencies(until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const latencies: number[] = [];
  while (!done) {
    const started = performance.now();
    const res = await fetch(`${app.baseUrl}/healthz`);
    await res.arrayBuffer();
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return latencies;
}

/** Rounds of the eight attacks at once: long enough for a few dozen probes. */
const ROUNDS = 4;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))]!;

describe("hostile request bodies", () => {
  it("do not hold up a concurrent small request: unauthenticated ones are never read, authenticated ones stop at their budget", async () => {
    const objects = manyObjects(BODY_BYTES);
    const wide = wideSchema(100_000);
    const unknown = unknownFields(100_000);
    const deep = deepSchema(5_000);
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const attacks: Attack[] = [
      { path: "/v1/chat/completions", headers: {}, body: objects },
      { path: "/v1/chat/completions", headers: bearer(newApiKeySecret()), body: objects },
      { path: `${KEYS_PATH}create/`, headers: {}, body: objects },
      { path: "/api/v1/accounts/register", headers: {}, body: objects },
      { path: "/v1/chat/completions", headers: bearer(key), body: wide },
      { path: "/v1/chat/completions", headers: bearer(key), body: unknown },
      { path: "/v1/chat/completions", headers: bearer(key), body: objects },
      { path: "/v1/chat/completions", headers: bearer(key), body: deep },
    ];

    // Warm-up (connections, JIT). The baseline: the probe while the same clients send bodies as large
    // to the same routes, harmless ones (one long prompt), so both runs move the same bytes.
    await healthLatencies(sleep(300));
    const harmless = longPrompt(BODY_BYTES);
    const control = attack(
      attacks.map((one) => ({ ...one, body: harmless })),
      ROUNDS,
    );
    const baseline = await healthLatencies(control);
    await control;
    const load = attack(attacks, ROUNDS);
    const during = await healthLatencies(load);
    const answers = await load;

    // Before the fix each hostile body held the event loop for hundreds of milliseconds (parsed before
    // any check), so most probes waited that long. Now an unauthenticated body is never read and an
    // authenticated one is scanned chunk by chunk until it passes a budget: the probes fare as they do
    // beside harmless bodies, within a few ms (p75), with room for a loaded 2-core machine's hiccups (p90).
    const report = `/healthz beside hostile bodies: p75 ${quantile(during, 0.75).toFixed(1)} ms, p90 ${quantile(during, 0.9).toFixed(1)} ms; beside harmless ones: p75 ${quantile(baseline, 0.75).toFixed(1)} ms, p90 ${quantile(baseline, 0.9).toFixed(1)} ms`;
    console.log(report);
    expect(quantile(during, 0.75), report).toBeLessThan(quantile(baseline, 0.75) + 5);
    expect(quantile(during, 0.9), report).toBeLessThan(quantile(baseline, 0.9) + 25);
    expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: ROUNDS }, () => [403, 403, 401, 413, 400, 400, 400, 400]).flat());
    for (const answer of answers) expect(answer.body.length, answer.body.slice(0, 300)).toBeLessThan(400);
    expect(during.length).toBeGreaterThan(10);
  }, 60_000);

  it("names the first few unknown fields of a body that has many, then how many more", async () => {
    const res = await app.request("POST", "/v1/chat/completions", { token: key, body: unknownFields(500).toString() });
    expectError(res, 400, "invalid_request_error", { code: "unknown_parameter", param: "messages[0].field_0" });
    expect(res.body.error.message).toBe(
      "Unrecognized request argument supplied: messages[0].field_0, messages[0].field_1, messages[0].field_2, messages[0].field_3, messages[0].field_4 and 495 more",
    );
  });

  it("refuses an object with more members than the budget with a short 400, before parsing it", async () => {
    const res = await app.request("POST", "/v1/chat/completions", { token: key, body: wideSchema(5_000).toString() });
    expectError(res, 400, "invalid_request_error", { code: "request_too_complex" });
    expect(res.body.error.message).toBe("Invalid request body: an object in the request body has more than 1000 members.");
  });
});
