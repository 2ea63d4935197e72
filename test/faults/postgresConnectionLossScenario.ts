import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { expect } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { parseSse } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.ts";
import { ADMIN_DATABASE_URL } from "../support/templateDatabase.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { countingReply, type CountingUpstream, startCountingUpstream, countingModel } from "./countingUpstream.ts";

/**
 * PostgreSQL connections lost under load, against every role as its own OS process (the production
 * entry points: node src/api/main.ts, workers/main.ts, projections/main.ts). Every role reaches
 * PostgreSQL through a TCP proxy of the test's own (tcpProxy.ts), so its connections can be killed two
 * ways: the server ends them (pg_terminate_backend on every backend of the test's database, as a
 * failover or an operator does) or the network resets them (a TCP RST on every open connection, as a
 * restarting pooler or a cloud idle timeout does).
 *
 * While clients keep sending streamed and non-streamed chats, the connections are killed `kills` times.
 * Then: every process is still running; every request ended within `endWithinMs` of its start, as a
 * reply, a 503 or a stream that ends with an error event (never a hang, a cut stream or a 500); a new
 * round of requests is served; every completion is charged at most once and the budget's spent is the
 * sum of the charges, with no hold left open (without waiting for the sweeper's 30 minutes).
 */
const API_MAIN = fileURLToPath(new URL("../../src/api/main.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const PROJECTOR_MAIN = fileURLToPath(new URL("../../projections/main.ts", import.meta.url));
const MODEL = "counting-model";
const PROMPT_TOKENS = 20;

export type ConnectionKill = "terminate" | "reset";

export type ConnectionLossScenario = {
  /** Processes of each role (api, worker, projector). */
  processesPerRole: number;
  /** Clients sending requests one after the other, all the time. */
  clients: number;
  /** Tokens of each reply, one every tokenDelayMs. */
  tokens: number;
  tokenDelayMs: number;
  /** Times the connections are killed, every `killEveryMs`, the first after `warmUpMs` of load. */
  kills: number;
  killEveryMs: number;
  warmUpMs: number;
  /** Load after the last kill. */
  afterMs: number;
  /** The longest a request may take, kill or not. */
  endWithinMs: number;
};

type Outcome = "ok" | "unavailable" | "error_event" | "other";
type RequestResult = {
  startedAt: number;
  ms: number;
  stream: boolean;
  status: number;
  outcome: Outcome;
  id: string | null;
  detail: string;
  /** A stream's usage chunk, or a reply's usage; null without one. */
  usage: { prompt_tokens: number; completion_tokens: number } | null;
};

/**
 * PostgreSQL black-holed (packets silently dropped, connections neither refused nor closed) while
 * `streams` streamed chats are generating, for `outageMs`, then back. Generations finish during the
 * outage, so their usage can only be recorded once PostgreSQL answers again.
 */
export type BlackholeScenario = {
  streams: number;
  /** Load before the black hole: the streams have begun. */
  beforeMs: number;
  outageMs: number;
  /** Chats sent during the outage (each must end within endWithinMs too, as a 503 or a reply). */
  duringOutage: number;
  /** The longest a request may take. */
  endWithinMs: number;
  /** The longest after PostgreSQL came back until every usage is recorded and every hold folded. */
  settledWithinMs: number;
  /** kill -9 of the first worker this long into the outage (its jobs go to another worker, which records their usage). */
  killWorkerAfterMs?: number;
};

export type ConnectionLossPlatform = {
  run(kind: ConnectionKill, scenario: ConnectionLossScenario): Promise<void>;
  blackhole(scenario: BlackholeScenario): Promise<void>;
  close(): Promise<void>;
};

export async function startConnectionLossPlatform(
  scenario: Pick<ConnectionLossScenario, "processesPerRole" | "tokens" | "tokenDelayMs"> & {
    /** Worker processes (default processesPerRole). */
    workers?: number;
    /** More environment for every role. */
    env?: Record<string, string>;
  },
): Promise<ConnectionLossPlatform> {
  const db: TestDatabase = await createTestDatabase();
  const redis: TestRedis = await createTestRedis();
  const upstream: CountingUpstream = await startCountingUpstream({
    totalTokens: scenario.tokens,
    tokenDelayMs: scenario.tokenDelayMs,
    promptTokens: PROMPT_TOKENS,
  });
  const admin = new URL(ADMIN_DATABASE_URL);
  const proxy: TcpProxy = await startTcpProxy({ host: admin.hostname, port: Number(admin.port || 5432) });
  const dir = await mkdtemp(path.join(tmpdir(), "pg-loss-"));
  const children: { role: string; child: ChildProcess }[] = [];
  const logs: string[] = [];
  const apis: string[] = [];
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 64 });
  const registry = path.join(dir, "registry.json");
  await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: [model] }));
  const env = {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: proxy.rewrite(db.url),
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: redis.prefix,
    MODELS_CONFIG: registry,
    WORKER_HEARTBEAT_MS: "500",
    PROJECTOR_POLL_MS: "20",
    LOG_LEVEL: "error",
    REGISTRATIONS_PER_ADDRESS: "100000",
    API_KEY_FAILURES_PER_ADDRESS: "100000",
    ...scenario.env,
  };
  const spawnRole = (role: string, main: string, roleEnv: Record<string, string>) => {
    const child = spawn(process.execPath, [main], { env: roleEnv, stdio: ["ignore", "pipe", "pipe"] });
    const note = (text: string) => logs.push(`${role}[${child.pid}]: ${text}`);
    child.stdout?.setEncoding("utf8").on("data", note);
    child.stderr?.setEncoding("utf8").on("data", note);
    child.on("exit", (code, signal) => note(`exited (${code ?? signal})\n`));
    children.push({ role, child });
  };
  for (let i = 0; i < scenario.processesPerRole; i++) {
    const port = await freePort();
    spawnRole("api", API_MAIN, { ...env, PORT: String(port), HOST: "127.0.0.1" });
    apis.push(`http://127.0.0.1:${port}`);
    spawnRole("projector", PROJECTOR_MAIN, env);
  }
  const workers = scenario.workers ?? scenario.processesPerRole;
  for (let i = 0; i < workers; i++) spawnRole("worker", WORKER_MAIN, env);
  const account: TestAccount = await createTestAccount(db.pool, { monthlyBudgetChf: 1000 });
  const started = async () => {
    const presence = new InferenceKeys(redis.prefix).modelWorkers(MODEL);
    await eventually(async () => ((await redis.redis.zcount(presence, Date.now(), "+inf")) === workers ? true : undefined), 60_000);
    for (const api of apis) await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000);
  };
  await started().catch((error: unknown) => {
    throw new Error(`the roles did not start: ${logs.join("")}`, { cause: error });
  });
  const created = await fetch(`${apis[0]}/api/v1/accounts/user/api-keys/create`, {
    method: "POST",
    headers: { authorization: `Bearer ${account.sessionToken}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "load" }),
  });
  expect(created.status).toBe(201);
  const key = ((await created.json()) as { key: string }).key;

  /** `giveUpMs`: a request still unanswered then is counted as hung (outcome "other"). */
  /** `onAnswered`: called once the response's status and headers came (a stream: admitted, its job under way). */
  const chat = async (api: string, index: number, stream: boolean, giveUpMs = 60_000, onAnswered?: () => void): Promise<RequestResult> => {
    const startedAt = Date.now();
    let usage: RequestResult["usage"] = null;
    const result = (status: number, outcome: Outcome, id: string | null, detail: string): RequestResult => ({
      startedAt,
      ms: Date.now() - startedAt,
      stream,
      status,
      outcome,
      id,
      detail,
      usage,
    });
    try {
      const response = await fetch(`${api}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: `Count, request ${index}.` }],
          max_tokens: scenario.tokens + 10,
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        }),
        signal: AbortSignal.timeout(giveUpMs),
      });
      onAnswered?.();
      const raw = await response.text();
      const id = response.headers.get("x-completion-id");
      if (response.status === 503) {
        const code = (JSON.parse(raw) as { error?: { code?: string } }).error?.code;
        return result(503, code === "database_unavailable" ? "unavailable" : "other", id, raw.slice(0, 300));
      }
      if (response.status !== 200) return result(response.status, "other", id, raw.slice(0, 300));
      if (!stream) {
        const body = JSON.parse(raw) as { id: string; choices: { message: { content: string } }[]; usage?: RequestResult["usage"] };
        usage = body.usage ?? null;
        const whole = body.choices[0]?.message.content === countingReply(scenario.tokens);
        return result(200, whole ? "ok" : "other", body.id, whole ? "" : raw.slice(0, 300));
      }
      const events = parseSse(raw);
      if (events.at(-1)?.data !== "[DONE]") return result(200, "other", id, `a cut stream: ${raw.slice(-300)}`);
      const chunks = events
        .slice(0, -1)
        .map((e) => JSON.parse(e.data) as { error?: unknown; choices?: { delta?: { content?: string } }[]; usage?: RequestResult["usage"] });
      usage = chunks.find((c) => c.usage)?.usage ?? null;
      if (chunks.some((c) => c.error)) return result(200, "error_event", id, JSON.stringify(chunks.find((c) => c.error)));
      const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
      return result(200, text === countingReply(scenario.tokens) ? "ok" : "other", id, text === countingReply(scenario.tokens) ? "" : `text: ${text}`);
    } catch (error) {
      return result(0, "other", null, String(error));
    }
  };

  const killConnections = async (kind: ConnectionKill): Promise<number> => {
    if (kind === "reset") return proxy.reset();
    // From the admin database: the test database's backends are the roles' (and this test's own pool's).
    const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    client.on("error", () => undefined);
    await client.connect();
    try {
      const killed = await client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [db.name]);
      return killed.rowCount ?? 0;
    } finally {
      await client.end();
    }
  };

  const alive = () => children.filter(({ child }) => child.exitCode === null && child.signalCode === null);

  /**
   * Within `withinMs`: no hold left open (without waiting for the sweeper's 30 minutes); then every
   * completion charged at most once, every one answered in full charged, and the budget's spent the sum
   * of the charges. Returns the charges by completion id.
   */
  const expectChargedOnce = async (results: RequestResult[], withinMs: number) => {
    const charges = await eventually(async () => {
      const holds = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      const budget = await db.pool.query<{ held: string }>("SELECT held_micro_chf::bigint AS held FROM rm_budget WHERE account_id = $1", [account.accountId]);
      if (holds.rows[0]!.n !== 0 || Number(budget.rows[0]?.held ?? 0) !== 0) return undefined;
      return db.pool.query<{ stream_id: string; n: number; cost: string; prompt: number; completion: number }>(
        `SELECT stream_id, count(*)::int AS n, sum((data->>'costMicroChf')::bigint)::bigint AS cost,
                max((data->>'promptTokens')::int) AS prompt, max((data->>'completionTokens')::int) AS completion
           FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1 GROUP BY stream_id`,
        [account.accountId],
      );
    }, withinMs).catch(async (error: unknown) => {
      const open = await db.pool.query("SELECT hold_id, created_at, settled_at FROM budget_holds WHERE account_id = $1", [account.accountId]);
      throw new Error(`budget holds left open: ${JSON.stringify(open.rows)}; ${logs.join("")}`, { cause: error });
    });
    expect(charges.rows.filter((r) => r.n !== 1)).toEqual([]);
    for (const r of results.filter((r) => r.outcome === "ok")) expect(charges.rows.map((c) => c.stream_id)).toContain(`completion-${r.id}`);
    const total = charges.rows.reduce((sum, r) => sum + Number(r.cost), 0);
    const spent = await db.pool.query<{ spent: string }>("SELECT spent_micro_chf::bigint AS spent FROM rm_budget WHERE account_id = $1", [account.accountId]);
    expect(Number(spent.rows[0]!.spent)).toBe(total);
    return new Map(charges.rows.map((r) => [r.stream_id.replace(/^completion-/, ""), r]));
  };

  return {
    async run(kind, s) {
      let stopping = false;
      let index = 0;
      const results: RequestResult[] = [];
      const client = async (c: number) => {
        while (!stopping) {
          const i = index++;
          results.push(await chat(apis[c % apis.length]!, i, i % 2 === 0, s.endWithinMs + 5000));
        }
      };
      const load = Array.from({ length: s.clients }, (_, c) => client(c));
      await new Promise((resolve) => setTimeout(resolve, s.warmUpMs));
      const killedAt: number[] = [];
      const killed: number[] = [];
      for (let k = 0; k < s.kills; k++) {
        if (k > 0) await new Promise((resolve) => setTimeout(resolve, s.killEveryMs));
        killedAt.push(Date.now());
        killed.push(await killConnections(kind));
      }
      await new Promise((resolve) => setTimeout(resolve, s.afterMs));
      stopping = true;
      await Promise.all(load);
      const summary = (rs: RequestResult[]) => {
        const counts = new Map<string, number>();
        for (const r of rs) counts.set(`${r.status} ${r.outcome}`, (counts.get(`${r.status} ${r.outcome}`) ?? 0) + 1);
        return [...counts].map(([k, n]) => `${k}: ${n}`).join(", ");
      };
      process.stdout.write(
        `${kind}: ${s.kills} kills (${killed.join(", ")} connections) under ${s.clients} clients; ${results.length} requests: ${summary(results)}; ` +
          `slowest ${Math.max(...results.map((r) => r.ms))} ms\n`,
      );
      expect(
        killed.every((n) => n > 0),
        "every kill found connections to kill",
      ).toBe(true);

      // No process died.
      expect(
        alive().map((c) => c.role),
        logs.join(""),
      ).toEqual(children.map((c) => c.role));

      // Every request ended in time, as a reply, a 503 database_unavailable or an error event.
      const slow = results.filter((r) => r.ms > s.endWithinMs);
      expect(
        slow.map((r) => `${r.outcome} after ${r.ms} ms`),
        "requests that took too long",
      ).toEqual([]);
      const wrong = results.filter((r) => r.outcome === "other");
      expect(
        wrong.map((r) => `${r.status} ${r.detail}`),
        `unexpected answers; ${logs.join("")}`,
      ).toEqual([]);
      expect(results.filter((r) => r.outcome === "ok").length).toBeGreaterThan(0);

      // The roles still serve: a new round of requests, on every API, is answered in full.
      const round = await Promise.all(
        Array.from({ length: 2 * apis.length }, (_, i) => chat(apis[i % apis.length]!, index++, i % 2 === 0, s.endWithinMs + 5000)),
      );
      expect(round.map((r) => `${r.outcome} ${r.detail}`)).toEqual(round.map(() => "ok "));
      results.push(...round);

      await expectChargedOnce(results, 30_000);
      expect(alive()).toHaveLength(children.length);
    },
    async blackhole(s) {
      let index = 1_000_000;
      let answered = 0;
      const streams = Array.from({ length: s.streams }, (_, i) =>
        chat(apis[i % apis.length]!, index++, true, s.endWithinMs + 5000, () => {
          answered++;
        }),
      );
      // The streams have begun (each admitted and answered 200) before the black hole, however loaded
      // the machine (a stream still being admitted would rightly be refused with a 503).
      await new Promise((resolve) => setTimeout(resolve, s.beforeMs));
      for (const until = Date.now() + 15_000; answered < s.streams && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 20));
      await proxy.setMode("blackhole");
      const outageStarted = Date.now();
      const during = Array.from({ length: s.duringOutage }, (_, i) => chat(apis[i % apis.length]!, index++, i % 2 === 0, s.endWithinMs + 5000));
      let killed: ChildProcess | null = null;
      if (s.killWorkerAfterMs !== undefined) {
        await new Promise((resolve) => setTimeout(resolve, s.killWorkerAfterMs));
        killed = children.find((c) => c.role === "worker")!.child;
        killed.kill("SIGKILL");
      }
      await new Promise((resolve) => setTimeout(resolve, s.outageMs - (s.killWorkerAfterMs ?? 0)));
      await proxy.setMode("pass");
      const back = Date.now();
      const [streamed, sentDuring] = await Promise.all([Promise.all(streams), Promise.all(during)]);
      const results = [...streamed, ...sentDuring];
      process.stdout.write(
        `blackhole ${s.outageMs} ms under ${s.streams} streams: ` +
          `${streamed.map((r) => `${r.outcome}${r.usage ? "+usage" : ""} ${r.ms} ms`).join(", ")}; ` +
          `during the outage: ${sentDuring.map((r) => `${r.status} ${r.outcome} ${r.ms} ms`).join(", ")}; outage began ${outageStarted - streamed[0]!.startedAt} ms in\n`,
      );

      // No process died (but the worker killed).
      const survivors = () => children.filter((c) => c.child !== killed);
      expect(
        alive().map((c) => c.role),
        logs.join(""),
      ).toEqual(survivors().map((c) => c.role));
      // Every request ended in time: the streams with their whole reply (their generations finished
      // during the outage), the requests sent during it as a 503 or a reply.
      expect(
        results.filter((r) => r.ms > s.endWithinMs).map((r) => `${r.outcome} after ${r.ms} ms`),
        "requests that took too long",
      ).toEqual([]);
      expect(
        streamed.filter((r) => r.outcome !== "ok").map((r) => `${r.status} ${r.outcome} ${r.detail}`),
        `streams not answered in full; ${logs.join("")}`,
      ).toEqual([]);
      expect(
        sentDuring.filter((r) => r.outcome === "other").map((r) => `${r.status} ${r.detail}`),
        "unexpected answers during the outage",
      ).toEqual([]);

      // Every delivered reply is charged exactly once, soon after PostgreSQL is back, and the usage its
      // client was shown is what was charged; no hold is left open; spent is the sum of the charges.
      const charges = await expectChargedOnce(results, s.settledWithinMs);
      process.stdout.write(`blackhole: every usage recorded and every hold folded ${Date.now() - back} ms after PostgreSQL came back\n`);
      for (const r of streamed) {
        const charge = charges.get(r.id!);
        expect(charge, `completion ${r.id} charged`).toBeDefined();
        expect(r.usage, `completion ${r.id}'s usage chunk`).toEqual({
          prompt_tokens: charge!.prompt,
          completion_tokens: charge!.completion,
          total_tokens: charge!.prompt + charge!.completion,
        });
      }

      // The roles serve again.
      const round = await Promise.all(Array.from({ length: 2 * apis.length }, (_, i) => chat(apis[i % apis.length]!, index++, i % 2 === 0, s.endWithinMs)));
      expect(round.map((r) => `${r.outcome} ${r.detail}`)).toEqual(round.map(() => "ok "));
      await expectChargedOnce([...results, ...round], s.settledWithinMs);
      expect(alive()).toHaveLength(survivors().length);
    },
    async close() {
      await Promise.all(
        children.map(async ({ child }) => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
          child.kill("SIGKILL");
          await exited;
        }),
      );
      await proxy.close();
      await upstream.close();
      await redis.close();
      await db.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
