import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { createTestAccount } from "../../support/testAccounts.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../../support/testPlatform.ts";
import { TEST_ADMIN_TOKEN } from "../../support/testApp.ts";
import { expectWellFormed, send, type FuzzRequest } from "./fuzzClient.ts";
import { applyMutations, awkwardString, type BodyPath, mutations, rawBody } from "./mutations.ts";

/**
 * Property: whatever body, headers or path a client sends to any endpoint, the answer comes in time, is
 * never a 5xx, and is either the endpoint's OpenAI shape or an OpenAI error body. Bodies are mutations of
 * a valid one (most end as 400s before any model work); those that stay valid run with max_tokens <= 2.
 * The sign-in limits are low, so after a few valid logins and registrations the rest cost no hashing.
 */
let platform: TestPlatform;
let key: string;
let keySession: string;
let keyIds: string[];
let storedChatId: string;
let storedTextId: string;
const PASSWORD = "fuzzing password 123";
let loginEmail: string;

beforeAll(async () => {
  platform = await startTestPlatform({
    env: { LOGIN_ATTEMPTS_PER_ADDRESS: "4", REGISTRATIONS_PER_ADDRESS: "3", JOB_START_TIMEOUT_MS: "10000", TRUST_PROXY_HOPS: "1" },
  });
  key = (await platform.createKey()).key;
  const owner = await createTestAccount(platform.deps.pool);
  keySession = owner.sessionToken;
  keyIds = [];
  for (const name of ["one", "two"]) {
    const res = await platform.request("POST", "/api/v1/accounts/user/api-keys/create", { token: keySession, body: { name } });
    keyIds.push(res.body.id as string);
  }
  loginEmail = `fuzz-${Date.now()}@example.ch`;
  await platform.request("POST", "/api/v1/accounts/register", {
    body: { email: loginEmail, password: PASSWORD },
    headers: { "x-forwarded-for": "192.0.2.200" },
  });
  const chat = await platform.request("POST", "/v1/chat/completions", {
    token: key,
    body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 },
  });
  storedChatId = chat.body.id as string;
  const text = await platform.request("POST", "/v1/completions", { token: key, body: { model: TINY_CHAT, prompt: "Hi", max_tokens: 2 } });
  storedTextId = text.body.id as string;
});
afterAll(async () => {
  await platform?.close();
});

/** A body that stays valid after mutation must not ask for a long generation. */
function keepGenerationsTiny(body: unknown): unknown {
  if (body && typeof body === "object" && !Array.isArray(body)) {
    const record = body as Record<string, unknown>;
    for (const field of ["max_tokens", "max_completion_tokens"]) {
      if (typeof record[field] === "number" && (record[field] as number) > 2) record[field] = 2;
    }
    if (record.max_tokens === undefined && record.max_completion_tokens === undefined && typeof record.model === "string") record.max_tokens = 2;
  }
  return body;
}

const printable = fc.stringMatching(/^[\x20-\x7e]{0,60}$/);
/** Header values a client might send (fetch only carries Latin-1 without line breaks). */
const headerSets = (token: string) =>
  fc.record(
    {
      authorization: fc.oneof(
        { weight: 8, arbitrary: fc.constant(`Bearer ${token}`) },
        { weight: 1, arbitrary: printable },
        { weight: 1, arbitrary: printable.map((v) => `Bearer ${v}`) },
      ),
      "content-type": fc.oneof(
        { weight: 8, arbitrary: fc.constant("application/json") },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            "text/plain",
            "application/json; charset=latin1",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
          ),
        },
      ),
      "idempotency-key": printable,
      "x-request-id": printable,
      "last-event-id": printable,
      "x-forwarded-for": fc.constantFrom("198.51.100.7", "not an address", "::1", ""),
    },
    { requiredKeys: ["authorization", "content-type"] },
  );

type BodyTarget = { name: string; method: string; path: fc.Arbitrary<string>; token: () => string; base: unknown; paths: BodyPath[]; runs: number };

const chatBase = {
  model: TINY_CHAT,
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hello" },
  ],
  max_tokens: 2,
  temperature: 0.5,
  stream: false,
};
const chatPaths: BodyPath[] = [
  ["model"],
  ["messages"],
  ["messages", 0],
  ["messages", 1, "role"],
  ["messages", 1, "content"],
  ["messages", 1, "name"],
  ["max_tokens"],
  ["max_completion_tokens"],
  ["temperature"],
  ["top_p"],
  ["stream"],
  ["stream_options"],
  ["stop"],
  ["presence_penalty"],
  ["seed"],
  ["n"],
  ["tools"],
  ["tool_choice"],
  ["response_format"],
  ["logprobs"],
  ["top_logprobs"],
  ["reasoning_effort"],
  ["user"],
];

const keyPath = (suffix: string) =>
  fc.oneof(fc.constant("real"), fc.constant("uuid"), awkwardString).map((which) => {
    const id = which === "real" ? keyIds[0]! : which === "uuid" ? "00000000-0000-4000-8000-000000000000" : safeSegment(which);
    return `/api/v1/accounts/user/api-keys/${id}${suffix}`;
  });

/** A path segment from any string: percent-encoded, or raw bytes when it has lone surrogates. */
function safeSegment(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return "%ED%A0%80";
  }
}

const bodyTargets: BodyTarget[] = [
  { name: "chat completions", method: "POST", path: fc.constant("/v1/chat/completions"), token: () => key, base: chatBase, paths: chatPaths, runs: 400 },
  {
    name: "text completions",
    method: "POST",
    path: fc.constant("/v1/completions"),
    token: () => key,
    base: { model: TINY_CHAT, prompt: "Once upon", max_tokens: 2, echo: false },
    paths: [
      ["model"],
      ["prompt"],
      ["max_tokens"],
      ["stream"],
      ["stream_options"],
      ["stop"],
      ["temperature"],
      ["suffix"],
      ["logprobs"],
      ["echo"],
      ["best_of"],
      ["n"],
    ],
    runs: 200,
  },
  {
    name: "embeddings",
    method: "POST",
    path: fc.constant("/v1/embeddings"),
    token: () => key,
    base: { model: TINY_EMBED, input: ["a", "b"], encoding_format: "float" },
    paths: [["model"], ["input"], ["input", 0], ["encoding_format"], ["dimensions"], ["user"]],
    runs: 200,
  },
  {
    name: "stored completions",
    method: "GET",
    path: fc.constantFrom("chat", "text", "other").chain((kind) =>
      fc.tuple(awkwardString, fc.constantFrom("", "?stream=true", "?stream=1", "?stream=nope", "?x=1")).map(([junk, query]) => {
        const id = kind === "chat" ? storedChatId : kind === "text" ? storedTextId : safeSegment(junk);
        return `${kind === "text" ? "/v1/completions" : "/v1/chat/completions"}/${id}${query}`;
      }),
    ),
    token: () => key,
    base: undefined,
    paths: [],
    runs: 100,
  },
  {
    name: "models",
    method: "GET",
    path: fc.oneof(
      fc.constant("/v1/models"),
      fc.constant(`/v1/models/${TINY_CHAT}`),
      awkwardString.map((s) => `/v1/models/${safeSegment(s)}`),
    ),
    token: () => key,
    base: undefined,
    paths: [],
    runs: 100,
  },
  {
    name: "key creation",
    method: "POST",
    path: fc.constant("/api/v1/accounts/user/api-keys/create/"),
    token: () => keySession,
    base: { name: "fuzzed" },
    paths: [["name"]],
    runs: 150,
  },
  { name: "key rename", method: "PATCH", path: keyPath("/update/"), token: () => keySession, base: { name: "renamed" }, paths: [["name"]], runs: 150 },
  { name: "key view", method: "GET", path: keyPath("/"), token: () => keySession, base: undefined, paths: [], runs: 60 },
  { name: "key revoke", method: "POST", path: keyPath("/revoke/"), token: () => keySession, base: undefined, paths: [], runs: 40 },
  {
    name: "registration",
    method: "POST",
    path: fc.constant("/api/v1/accounts/register"),
    token: () => "",
    base: { email: "new-user@example.ch", password: "a long enough password" },
    paths: [["email"], ["password"]],
    runs: 150,
  },
  {
    name: "login",
    method: "POST",
    path: fc.constant("/api/v1/accounts/login"),
    token: () => "",
    base: { email: "someone@example.ch", password: PASSWORD },
    paths: [["email"], ["password"]],
    runs: 150,
  },
  {
    name: "usage",
    method: "GET",
    path: fc
      .array(
        fc.tuple(
          fc.constantFrom("start_date", "end_date", "group_by", "x"),
          fc.oneof(awkwardString, fc.constantFrom("2025-01-01", "0000-01-01", "day", "key")),
        ),
        { maxLength: 4 },
      )
      .map((pairs) => `/api/v1/accounts/user/usage?${pairs.map(([k, v]) => `${k}=${safeSegment(v)}`).join("&")}`),
    token: () => keySession,
    base: undefined,
    paths: [],
    runs: 200,
  },
  {
    name: "admin",
    method: "PUT",
    path: fc
      .oneof(fc.constant("real"), awkwardString)
      .map((id) => `/api/v1/admin/accounts/${id === "real" ? "00000000-0000-4000-8000-000000000000" : safeSegment(id)}/subscription`),
    token: () => TEST_ADMIN_TOKEN,
    base: { status: "active", monthly_budget_chf: 10 },
    paths: [["status"], ["monthly_budget_chf"]],
    runs: 100,
  },
];

describe("fuzzed requests get an answer in the OpenAI shape, never a 5xx or a hang", () => {
  for (const target of bodyTargets) {
    it(`${target.name} (${target.runs} cases)`, async () => {
      const body =
        target.base === undefined
          ? fc.constant(undefined)
          : fc.oneof(
              { weight: 9, arbitrary: mutations(target.paths).map((m) => ({ json: keepGenerationsTiny(applyMutations(target.base, m)) })) },
              { weight: 1, arbitrary: rawBody.map((raw) => ({ raw })) },
            );
      await fc.assert(
        fc.asyncProperty(target.path, body, headerSets(target.token()), async (path, requestBody, headers) => {
          const request: FuzzRequest = { method: target.method, path, headers, ...(requestBody ? { body: requestBody } : {}) };
          expectWellFormed(request, await send(platform.baseUrl, request));
        }),
        { numRuns: target.runs },
      );
    });
  }

  it("a few thousand nesting levels in any fuzzed field (built as text: no recursion on either side)", async () => {
    const depth = 3000;
    const deep = `${'{"a":['.repeat(depth)}1${"]}".repeat(depth)}`;
    for (const target of bodyTargets) {
      if (target.base === undefined) continue;
      for (const path of target.paths) {
        const marker = "__deeply_nested__";
        const body = structuredClone(target.base) as Record<string, unknown>;
        let parent = body;
        for (const step of path.slice(0, -1)) parent = parent[step] as Record<string, unknown>;
        parent[path.at(-1)!] = marker;
        const raw = JSON.stringify(keepGenerationsTiny(body)).replace(`"${marker}"`, deep);
        const request: FuzzRequest = {
          method: target.method,
          path: fc.sample(target.path, 1)[0]!,
          headers: { authorization: `Bearer ${target.token()}`, "content-type": "application/json" },
          body: { raw },
        };
        expectWellFormed(request, await send(platform.baseUrl, request));
      }
    }
  });

  it("any method on any path (300 cases)", async () => {
    const segment = fc.oneof(awkwardString.map(safeSegment), fc.constantFrom("v1", "api", "chat", "completions", "models", "%", "%ZZ", "%00", "..", "."));
    const path = fc
      .tuple(fc.constantFrom("/v1/", "/api/v1/", "/api/v1/accounts/", "/"), fc.array(segment, { maxLength: 4 }))
      .map(([prefix, parts]) => prefix + parts.join("/"));
    const method = fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD");
    await fc.assert(
      fc.asyncProperty(method, path, headerSets(key), fc.option(rawBody, { nil: undefined }), async (verb, p, headers, raw) => {
        const request: FuzzRequest = { method: verb, path: p, headers, ...(raw !== undefined && verb !== "GET" && verb !== "HEAD" ? { body: { raw } } : {}) };
        expectWellFormed(request, await send(platform.baseUrl, request));
      }),
      // A console page with a trailing slash (a case a random run found once) is always tried.
      { numRuns: 300, examples: [["GET", "/models/", { authorization: `Bearer ${key}`, "content-type": "text/plain" }, undefined]] },
    );
  });
});
