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
 * The clients, on a thread of their own (as on another machine: their sockets' work is not the
 * server's event loop). For each message naming a set of requests, sends them all at once and answers
 * with their statuses and bodies. Each request has a socket of its own (`Connection: close`) and writes
 * its whole body at once, as a client that does not read before it has sent does.
 */
const CLIENTS = String.raw`
const { parentPort, workerData } = require("node:worker_threads");
const { connect } = require("node:net");
const CRLF = String.fromCharCode(13, 10);
function post(port, { path, headers, body }) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (data) => { received += data; });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const at = received.indexOf(CRLF + CRLF);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]), body: at < 0 ? "" : received.slice(at + 4) });
    });
    const all = { host: "127.0.0.1", "content-type": "application/json", "content-length": String(body.length), connection: "close", ...headers };
    socket.write("POST " + path + " HTTP/1.1" + CRLF + Object.entries(all).map(([n, v]) => n + ": " + v).join(CRLF) + CRLF + CRLF);
    socket.write(body);
  });
}
parentPort.on("message", async (set) => {
  parentPort.postMessage(await Promise.all(workerData.sets[set].map((request) => post(workerData.port, request))));
});
`;

/** The client thread with its sets of requests; `send(set)` sends one set at once. */
function clients(sets: Record<string, Attack[]>) {
  const worker = new Worker(CLIENTS, { eval: true, workerData: { port: Number(new URL(app.baseUrl).port), sets } });
  return {
    send: (set: string) =>
      new Promise<RawAnswer[]>((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
        worker.postMessage(set);
      }),
    close: () => worker.terminate(),
  };
}

/**
 * Latencies of GET /healthz probes sent every PROBE_EVERY_MS until `until` settles, each counted from
 * when it was due (not when a late timer sent it), so a stalled event loop shows in every probe it held up.
 */
async function healthLatencies(until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const probes: Array<Promise<number>> = [];
  const start = performance.now();
  for (let k = 0; !done; k++) {
    const due = start + k * PROBE_EVERY_MS;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    probes.push(
      fetch(`${app.baseUrl}/healthz`)
        .then((res) => res.arrayBuffer())
        .then(() => performance.now() - due),
    );
  }
  return Promise.all(probes);
}

const PROBE_EVERY_MS = 10;
/** Rounds of the eight requests at once, harmless then hostile. */
const ROUNDS = 4;
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

    // The baseline: the probes while the same clients send bodies as large to the same routes, harmless
    // ones (one long prompt), so both move the same bytes. Alternated, so that the machine's other load
    // weighs on both alike.
    const harmless = longPrompt(BODY_BYTES);
    const sender = clients({ hostile: attacks, harmless: attacks.map((one) => ({ ...one, body: harmless })) });
    const baseline: number[] = [];
    const during: number[] = [];
    const answers: RawAnswer[] = [];
    try {
      await healthLatencies(sender.send("harmless"));
      for (let round = 0; round < ROUNDS; round++) {
        baseline.push(...(await healthLatencies(sender.send("harmless"))));
        const hostile = sender.send("hostile");
        during.push(...(await healthLatencies(hostile)));
        answers.push(...(await hostile));
      }
    } finally {
      await sender.close();
    }

    // Before the fix each hostile body held the event loop for hundreds of milliseconds (parsed before
    // any check), so most probes waited that long (p50 0.4-1.4 s, against 10-140 ms beside harmless
    // bodies). Now an unauthenticated body is never parsed and an authenticated one is scanned chunk by
    // chunk until it passes a budget: the probes fare as they do beside harmless bodies. The margins are
    // the noise of a 2-core machine shared with other work (tens of ms at a load of 10), far below a stall.
    const p = (values: number[], q: number) => quantile(values, q).toFixed(1);
    const report = `/healthz beside hostile bodies: p50 ${p(during, 0.5)} ms, p75 ${p(during, 0.75)} ms; beside harmless ones: p50 ${p(baseline, 0.5)} ms, p75 ${p(baseline, 0.75)} ms`;
    expect(quantile(during, 0.5), report).toBeLessThan(quantile(baseline, 0.5) + 40);
    expect(quantile(during, 0.75), report).toBeLessThan(quantile(baseline, 0.75) + 100);
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

  it("answers a field name megabytes long with a short error: its message and param quote only its start, never half a character", async () => {
    for (const [name, unit] of [
      ["A".repeat(1_000_000), "A"],
      ["😀".repeat(500_000), "😀"],
    ] as const) {
      const res = await app.request("POST", "/v1/chat/completions", {
        token: key,
        body: { model: "m", messages: [{ role: "user", content: "hi", [name]: 1 }] },
      });
      expectError(res, 400, "invalid_request_error", { code: "unknown_parameter" });
      expect(res.text.length).toBeLessThan(3_000);
      expect(res.body.error.message).toMatch(new RegExp(`^Unrecognized request argument supplied: messages\\[0\\]\\.(${unit})+…$`, "u"));
      expect(res.body.error.param).toMatch(new RegExp(`^messages\\[0\\]\\.(${unit})+…$`, "u"));
      expect(res.body.error.param.length).toBeLessThanOrEqual(257);
    }
  });

  it("refuses a key named __proto__ (plain or escaped) wherever it is, naming its place, instead of dropping it", async () => {
    const bodies: [string, string, string | null][] = [
      ["/v1/chat/completions", `{"__proto__": {"max_tokens": 1}, "model": "m", "messages": [{"role": "user", "content": "hi"}]}`, null],
      ["/v1/responses", `{"model": "m", "input": "hi", "metadata": {"a": "b", "__proto__": "v"}}`, "metadata"],
      ["/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "hi", "\\u005f\\u005fproto\\u005f\\u005f": 1}]}`, "messages[0]"],
    ];
    for (const [path, body, param] of bodies) {
      const res = await app.request("POST", path, { token: key, body });
      expectError(res, 400, "invalid_request_error", { code: "invalid_value", param });
      expect(res.body.error.message).toContain("'__proto__' is not accepted");
    }
    // The word in a value is no key: such a body goes on to be checked as any other.
    const prose = await app.request("POST", "/v1/chat/completions", {
      token: key,
      body: `{"model": "m", "messages": [{"role": "user", "content": "what is __proto__?", "x": 1}]}`,
    });
    expectError(prose, 400, "invalid_request_error", { code: "unknown_parameter", param: "messages[0].x" });
  });

  it("refuses an object with more members than the budget with a short 400, before parsing it", async () => {
    const res = await app.request("POST", "/v1/chat/completions", { token: key, body: wideSchema(5_000).toString() });
    expectError(res, 400, "invalid_request_error", { code: "request_too_complex" });
    expect(res.body.error.message).toBe("Invalid request body: an object in the request body has more than 1000 members.");
  });

  it("refuses a request whose JSON Schemas hold more than 50,000 values in all, before checking them", async () => {
    const properties = Object.fromEntries(Array.from({ length: 999 }, (_, i) => [`p${i}`, { type: "string" }]));
    const tools = Array.from({ length: 40 }, (_, i) => ({ type: "function", function: { name: `f${i}`, parameters: { type: "object", properties } } }));
    const res = await app.request("POST", "/v1/chat/completions", { token: key, body: { model: "m", messages: [{ role: "user", content: "hi" }], tools } });
    expectError(res, 400, "invalid_request_error", { param: "tools", code: "invalid_value" });
    expect(res.body.error.message).toBe("Invalid 'tools': the JSON Schemas of a request may hold at most 50000 values in all.");
  });

  it("holds a Responses request's JSON Schemas to the same 50,000 values in all", async () => {
    const properties = Object.fromEntries(Array.from({ length: 999 }, (_, i) => [`p${i}`, { type: "string" }]));
    const tools = Array.from({ length: 40 }, (_, i) => ({ type: "function", name: `f${i}`, parameters: { type: "object", properties } }));
    const res = await app.request("POST", "/v1/responses", { token: key, body: { model: "m", input: "hi", tools } });
    expectError(res, 400, "invalid_request_error", { param: "tools", code: "invalid_value" });
    expect(res.body.error.message).toBe("Invalid 'tools': the JSON Schemas of a request may hold at most 50000 values in all.");
  });
});
