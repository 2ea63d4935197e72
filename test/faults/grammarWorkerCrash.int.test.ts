import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { exited, spawnWorker } from "./workerCrashScenario.ts";

const PACED_WORKER = fileURLToPath(new URL("./pacedWorkerMain.ts", import.meta.url));
const MODEL = "austen-grammar";
const MAX_TOKENS = 300;

/** Twelve short strings: a reply of a hundred tokens or so, which the paced worker streams over seconds. */
const SCHEMA = {
  type: "object",
  properties: { lines: { type: "array", items: { type: "string", maxLength: 10 }, minItems: 12, maxItems: 12 } },
  required: ["lines"],
  additionalProperties: false,
};

type Stream = { events: { id: number | null; data: string }[]; text: string; done: Promise<void> };

/**
 * A worker killed with SIGKILL while it streams a response_format json_schema reply of the built-in
 * (embedded) model: the second worker continues it with the grammar advanced over the text already sent
 * (the embedded engine generates it again with its tokens forced, and sends only what follows). The
 * client sees one stream: no error, ids without a repeat or a gap, content that parses and matches the
 * schema, usage within max_tokens, charged once as shown.
 */
describe("a worker killed mid-reply under a response_format json_schema", () => {
  it("has its reply continued by another worker under the grammar: one stream that matches the schema", async () => {
    const model: ModelEntry = {
      id: MODEL,
      owned_by: "test-lab",
      engine: { type: "embedded", path: fileURLToPath(new URL("../../models/austen-1m.gguf", import.meta.url)), contextLength: 512, threads: 1 },
      capabilities: { chat: true, completions: true, embeddings: false, tools: true, json_schema: true, logprobs: false, reasoning: false },
      context_length: 512,
      pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
    } as ModelEntry;
    const platform = await startTestPlatform({ startWorker: false, models: () => [model], env: { JOB_IDLE_TIMEOUT_MS: "45000" } });
    const workers: ChildProcess[] = [];
    const logs: string[] = [];
    try {
      const { key } = await platform.createKey();
      const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
      const first = spawnWorker(platform, logs, PACED_WORKER, ["60"]);
      workers.push(first);
      await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 60_000);

      const stream = streamChat(platform, key, {
        model: MODEL,
        messages: [{ role: "user", content: "Write twelve short lines about Pemberley." }],
        max_tokens: MAX_TOKENS,
        temperature: 1,
        seed: 5,
        stream: true,
        stream_options: { include_usage: true },
        response_format: { type: "json_schema", json_schema: { name: "lines", schema: SCHEMA } },
      });
      await eventually(async () => (stream.text.length >= 30 ? true : undefined), 30_000).catch((error: unknown) => {
        throw new Error(`the stream did not get under way (${JSON.stringify(stream.text)}); worker: ${logs.join("")}`, { cause: error });
      });
      first.kill("SIGKILL");
      await exited(first);
      const sentBeforeKill = stream.text;
      workers.push(spawnWorker(platform, logs, PACED_WORKER, ["5"]));
      await stream.done;
      process.stdout.write(`killed after ${JSON.stringify(sentBeforeKill)}; the stream ended ${JSON.stringify(stream.text)}\n`);

      expect(stream.events.at(-1)?.data).toBe("[DONE]");
      const events = stream.events.slice(0, -1);
      const chunks = events.map((e) => JSON.parse(e.data));
      expect(
        chunks.filter((c) => c.error !== undefined),
        logs.join(""),
      ).toEqual([]);
      expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
      // Killed mid-reply: the text sent then is the start of the reply, which went on from there.
      expect(sentBeforeKill.length).toBeLessThan(stream.text.length);
      expect(stream.text.startsWith(sentBeforeKill)).toBe(true);
      const ajv = new Ajv();
      expect(ajv.validate(SCHEMA, JSON.parse(stream.text)), `${stream.text}: ${ajv.errorsText()}`).toBe(true);
      expect(chunks.filter((c) => c.choices?.[0]?.finish_reason).map((c) => c.choices[0].finish_reason)).toEqual(["stop"]);
      const usage = chunks.at(-1).usage;
      expect(usage.completion_tokens).toBeGreaterThan(0);
      expect(usage.completion_tokens).toBeLessThanOrEqual(MAX_TOKENS);
      const recorded = await completionEvents(platform.deps.pool, chunks[0].id);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]!.data).toMatchObject({ outcome: "finished", promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens });
    } finally {
      for (const worker of workers) {
        worker.kill("SIGKILL");
        await exited(worker);
      }
      await platform.close();
    }
  }, 120_000);
});

/** A streamed chat through the API over plain fetch, its SSE events collected as they arrive. */
function streamChat(platform: TestPlatform, key: string, body: object): Stream {
  const stream: Stream = { events: [], text: "", done: Promise.resolve() };
  stream.done = (async () => {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    });
    if (response.status !== 200 || !response.body) throw new Error(`HTTP ${response.status} ${await response.text()}`);
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const part of response.body) {
      buffer += decoder.decode(part, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let id: number | null = null;
        let data: string | null = null;
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) id = Number(line.slice(4));
          else if (line.startsWith("data: ")) data = (data ?? "") + line.slice(6);
        }
        if (data === null) continue;
        stream.events.push({ id, data });
        if (data !== "[DONE]") stream.text += JSON.parse(data).choices?.[0]?.delta?.content ?? "";
      }
    }
  })();
  stream.done.catch(() => undefined);
  return stream;
}
