import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import OpenAI from "openai";
import type { RouteFactory } from "../../src/api/app.ts";
import type { AppDeps } from "../../src/api/appDeps.ts";
import { createInferenceServices, type InferenceServices } from "../../src/api/inference/inferenceServices.ts";
import { LocalReplyChannels } from "../../src/contracts/localReplyChannels.ts";
import { loadModelRegistry } from "../../src/models/loadModelRegistry.ts";
import { publishPriceTable } from "../../src/ledger/pricing/priceTable.ts";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import type { RedisTarget } from "../../src/redis/redisTarget.ts";
import { type Logger, silentLogger } from "../../src/observability/logger.ts";
import { routeFactories } from "../../src/api/routes.ts";
import type { Engine } from "../../workers/engines/engine.ts";
import { writeTinyModel, type TinyModelInfo } from "../../tools/gguf/tinyModel.ts";
import { startWorker, type RunningWorker } from "../../workers/startWorker.ts";
import { createTestAccount, type TestAccount } from "./testAccounts.ts";
import { startTestApp, type TestApp } from "./testApp.ts";

export const TINY_CHAT = "tiny-chat";
export const TINY_EMBED = "tiny-embed";
export const TINY_PLAIN = "tiny-plain";

/** Registry entries served by the tiny generated model (one engine, loaded once, threads 1). */
export function tinyModelEntries(modelFile: string): ModelEntry[] {
  const engine = { type: "embedded" as const, path: modelFile, threads: 1, contextLength: 1024, maxConcurrency: 2 };
  const pricing = { input_per_million_chf: 0.5, output_per_million_chf: 1.5 };
  const none = { chat: false, completions: false, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false };
  return [
    {
      id: TINY_CHAT,
      owned_by: "inference-platform",
      created: 1735689600,
      engine,
      capabilities: { ...none, chat: true, completions: true, tools: true, json_schema: true, logprobs: true },
      context_length: 1024,
      pricing,
      extra_parameters: ["top_k", "min_p", "repetition_penalty"],
    },
    {
      id: TINY_EMBED,
      owned_by: "inference-platform",
      created: 1735689600,
      engine,
      capabilities: { ...none, embeddings: true },
      context_length: 1024,
      pricing: { input_per_million_chf: 0.25, output_per_million_chf: 0 },
    },
    /** Chat only: no tools, json_schema, logprobs or completions (for the capability errors). */
    { id: TINY_PLAIN, owned_by: "test-lab", created: 1735689600, engine, capabilities: { ...none, chat: true }, context_length: 1024, pricing },
  ];
}

export type TestPlatform = TestApp & {
  tiny: TinyModelInfo;
  dir: string;
  inference: InferenceServices;
  worker: RunningWorker | null;
  /** With `colocated`: the process's reply channels, which the API registered its own in (as runRoles does for `npm start`). */
  localReplies: LocalReplyChannels | null;
  /** `remote`: the worker publishes every reply, as a worker of another process (only differs with `colocated`). */
  startWorker(options?: { wrapEngine?: (model: RegisteredModel, engine: Engine) => Engine; models?: string[]; remote?: boolean }): Promise<RunningWorker>;
  stopWorker(): Promise<void>;
  /** An account with an active subscription (unless said otherwise) and a key made through the key API. */
  createKey(options?: { subscription?: "active" | "inactive" }): Promise<{ account: TestAccount; key: string; keyId: string }>;
  openai(key: string, options?: { maxRetries?: number }): OpenAI;
};

/** The app with inference routes and services of its own (startTestApp's options). */
async function startInferenceApp(
  registry: Awaited<ReturnType<typeof loadModelRegistry>>,
  appOptions: Parameters<typeof startTestApp>[0],
  localReplies: LocalReplyChannels | null = null,
): Promise<{ app: TestApp; inference: InferenceServices }> {
  let services: InferenceServices | null = null;
  const servicesFor = (deps: AppDeps): InferenceServices => (services ??= createInferenceServices(localReplies ? { ...deps, localReplies } : deps, registry));
  const routes: RouteFactory[] = routeFactories.map((factory) => (deps: AppDeps) => factory({ ...deps, inference: servicesFor(deps) }));
  const app = await startTestApp({ ...appOptions, routes });
  const inference = services as InferenceServices | null;
  if (!inference) throw new Error("the app did not build its routes");
  return { app, inference };
}

/**
 * Another API process of `platform`: the same database, Redis and prefix and registry, with its own
 * pool, Redis connections, auth cache, reply channel and inference services.
 */
export async function startSecondApi(platform: TestPlatform, options: Pick<NonNullable<Parameters<typeof startTestApp>[0]>, "keyAuth"> = {}): Promise<TestApp> {
  // As an API role starts: its registry's prices published (its jobs are charged at them).
  const loaded = await loadModelRegistry(platform.deps.config.modelsConfigPath);
  const registry = loaded.withPriceTableVersion(await publishPriceTable(platform.deps.pool, loaded.priceTableVersion, loaded.prices(), new Date()));
  const { app, inference } = await startInferenceApp(registry, {
    ...options,
    shareWith: platform,
    env: { MODELS_CONFIG: platform.deps.config.modelsConfigPath, WORKER_HEARTBEAT_MS: "500" },
  });
  return {
    ...app,
    async close() {
      await inference.close();
      await app.close();
    },
  };
}

/**
 * The real app (fresh database, unique Redis prefix) with its inference services, plus an in-process
 * worker serving a registry in a temp dir that points at a freshly written tiny model.
 */
export async function startTestPlatform(
  options: {
    models?: (tinyModelFile: string) => ModelEntry[];
    env?: Record<string, string>;
    startWorker?: boolean;
    wrapEngine?: (model: RegisteredModel, engine: Engine) => Engine;
    /** The Redis of the app and the worker (startTestApp's `redisUrl`: a server's URL or a cluster). */
    redisUrl?: string | RedisTarget;
    /** The app's logger (startTestApp's `logger`). */
    logger?: Logger;
    /** Where the app (and the worker, which shares its pool) reaches its database (startTestApp's `databaseUrl`). */
    databaseUrl?: (url: string) => string;
    /**
     * The API and the worker as roles of one process (`npm start`): the worker hands the API its replies
     * in process (LocalReplyChannels) instead of publishing them. Default: as roles of two processes.
     */
    colocated?: boolean;
  } = {},
): Promise<TestPlatform> {
  const dir = await mkdtemp(path.join(tmpdir(), "inference-test-"));
  const modelFile = path.join(dir, "tiny.gguf");
  const tiny = await writeTinyModel(modelFile);
  const registryFile = path.join(dir, "registry.json");
  await writeFile(registryFile, JSON.stringify({ price_table_version: "test-1", models: (options.models ?? tinyModelEntries)(modelFile) }, null, 2));
  const registry = await loadModelRegistry(registryFile);

  const env = { MODELS_CONFIG: registryFile, WORKER_HEARTBEAT_MS: "500", ...options.env };
  const localReplies = options.colocated ? new LocalReplyChannels() : null;
  const { app, inference } = await startInferenceApp(
    registry,
    {
      env,
      ...(options.redisUrl ? { redisUrl: options.redisUrl } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
    },
    localReplies,
  );

  const platform: TestPlatform = {
    ...app,
    tiny,
    dir,
    inference,
    worker: null,
    localReplies,
    async startWorker(workerOptions = {}) {
      if (platform.worker) throw new Error("a worker is already running");
      const config = workerOptions.models ? { ...app.deps.config, workerModels: workerOptions.models } : app.deps.config;
      const wrapEngine = workerOptions.wrapEngine ?? options.wrapEngine;
      const context = { config, pool: app.deps.pool, logger: silentLogger, metrics: app.deps.metrics };
      const local = localReplies && !workerOptions.remote ? { localReplies } : {};
      platform.worker = await startWorker({ ...context, ...local }, wrapEngine ? { wrapEngine } : {});
      return platform.worker;
    },
    async stopWorker() {
      const worker = platform.worker;
      platform.worker = null;
      await worker?.stop();
    },
    async createKey(keyOptions = {}) {
      const account = await createTestAccount(app.deps.pool, { subscription: keyOptions.subscription ?? "active" });
      const created = await app.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: "test key" } });
      if (created.status !== 201) throw new Error(`key creation failed: ${created.status} ${created.text}`);
      return { account, key: created.body.key as string, keyId: created.body.id as string };
    },
    openai(key, clientOptions = {}) {
      return new OpenAI({ baseURL: `${app.baseUrl}/v1`, apiKey: key, maxRetries: clientOptions.maxRetries ?? 0, timeout: 60_000 });
    },
    async close() {
      await platform.stopWorker();
      await inference.close();
      await app.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  if (options.startWorker !== false) await platform.startWorker();
  return platform;
}
