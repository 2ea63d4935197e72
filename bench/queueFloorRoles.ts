import http from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { Queue, Worker } from "bullmq";
import { createRedis } from "../src/redis/createRedis.ts";

/**
 * The two processes of the bench's "queue floor" path: the platform's architecture with none of the
 * product in it, to show what the architecture alone costs on this machine.
 *
 * - `--role api`: an HTTP server that reads the body, enqueues a BullMQ job (job id = a counter, the
 *   same job options as the platform) and relays what comes back on its Redis reply channel to the
 *   client as it arrives. No Koa, auth, validation, admission, budget, events, replay stream or
 *   re-encoding: the engine's SSE bytes go through unchanged.
 * - `--role worker`: a BullMQ worker that POSTs the job's body to the engine (node:http, keep-alive)
 *   and PUBLISHes every chunk of the answer to the reply channel, then an end marker.
 *
 * Both print one JSON line once ready (`{"url"}` for the api); the bench starts and stops them
 * (bench/queueFloor.ts).
 */
const QUEUE = "floor";

async function api(redisUrl: string, prefix: string): Promise<void> {
  const commands = createRedis(redisUrl, { kind: "fail-fast" });
  const subscriber = createRedis(redisUrl, { kind: "subscriber" });
  const queue = new Queue(QUEUE, { connection: commands, prefix });
  const replyTo = `${prefix}:reply`;
  const open = new Map<string, http.ServerResponse>();
  subscriber.on("message", (_channel: string, text: string) => {
    const [id, chunk] = JSON.parse(text) as [string, string | null];
    const res = open.get(id);
    if (res === undefined) return;
    if (chunk === null) {
      open.delete(id);
      res.end();
    } else {
      res.write(chunk);
    }
  });
  await subscriber.subscribe(replyTo);
  let next = 0;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as unknown;
      const id = `job-${next++}`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      open.set(id, res);
      queue
        .add("run", { body, replyTo }, { jobId: id, attempts: 1, removeOnComplete: true, removeOnFail: { age: 3600, count: 1000 } })
        .catch((error: unknown) => {
          open.delete(id);
          res.destroy(error as Error);
        });
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions` })}\n`);
}

async function worker(redisUrl: string, prefix: string, engineUrl: string, concurrency: number): Promise<void> {
  const target = new URL(`${engineUrl}/chat/completions`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const publisher = createRedis(redisUrl, { kind: "worker" });
  const runJob = (data: { body: unknown; replyTo: string }, id: string) =>
    new Promise<void>((resolve, reject) => {
      const payload = JSON.stringify(data.body);
      const request = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: "POST",
          agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        },
        (response) => {
          response.setEncoding("utf8");
          // Commands on one connection are answered in order: the end marker's reply settles them all.
          response.on("data", (chunk: string) => void publisher.publish(data.replyTo, JSON.stringify([id, chunk])).catch(() => undefined));
          response.on("end", () => publisher.publish(data.replyTo, JSON.stringify([id, null])).then(() => resolve(), reject));
          response.on("error", reject);
        },
      );
      request.on("error", reject);
      request.end(payload);
    });
  const bullWorker = new Worker<{ body: unknown; replyTo: string }>(QUEUE, (job) => runJob(job.data, job.id!), {
    connection: createRedis(redisUrl, { kind: "worker" }),
    prefix,
    concurrency,
    maxStalledCount: 0,
    removeOnComplete: { count: 0 },
  });
  bullWorker.on("error", () => undefined);
  await bullWorker.waitUntilReady();
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      role: { type: "string" },
      "redis-url": { type: "string" },
      prefix: { type: "string" },
      engine: { type: "string" },
      concurrency: { type: "string", default: "32" },
    },
  });
  const redisUrl = values["redis-url"]!;
  const prefix = values.prefix!;
  if (values.role === "api") await api(redisUrl, prefix);
  else if (values.role === "worker") await worker(redisUrl, prefix, values.engine!, Number(values.concurrency));
  else throw new Error(`unknown --role ${values.role}`);
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.on("disconnect", stop);
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    process.stderr.write(`queue floor failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}
