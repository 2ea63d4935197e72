import type { ChildProcess } from "node:child_process";
import { describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform } from "../support/testPlatform.ts";
import { SseReader } from "../inference/sseReader.ts";
import { countingModel, countingReply, startCountingUpstream } from "./countingUpstream.ts";
import { exited, spawnWorker } from "./workerCrashScenario.ts";

const MODEL = "counting-model";
const PROMPT_TOKENS = 20;

/**
 * The owner cancels a stream while the worker that ran it is dead (SIGKILL) and no other worker runs:
 * the cancel reaches no worker then. The worker started afterwards takes the job over (its lock expired)
 * and must find the cancel (its mark) before it continues: the stream ends cancelled, with its usage
 * chunk, and only what was delivered is charged; the reply is not generated on.
 */
describe("a cancel sent while the job's worker is dead", () => {
  it("is honoured by the worker that takes the job over: cancelled, charged for what was delivered", async () => {
    const upstream = await startCountingUpstream({ totalTokens: 400, tokenDelayMs: 10, promptTokens: PROMPT_TOKENS });
    const platform = await startTestPlatform({
      startWorker: false,
      models: () => [countingModel(upstream, { id: MODEL, maxConcurrency: 8, continueFinalMessage: true })],
      env: { JOB_IDLE_TIMEOUT_MS: "45000" },
    });
    const workers: ChildProcess[] = [];
    const logs: string[] = [];
    try {
      const { key } = await platform.createKey();
      workers.push(spawnWorker(platform, logs));
      const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
      await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);

      const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: "Count." }],
          max_tokens: 500,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      expect(response.status).toBe(200);
      const completionId = response.headers.get("x-completion-id")!;
      const events: { id: number | null; data: string }[] = [];
      let text = "";
      const reader = new SseReader(response);
      const reading = (async () => {
        for (let item = await reader.next(); item; item = await reader.next()) {
          if (item.data === undefined) continue;
          events.push({ id: item.id === undefined ? null : Number(item.id), data: item.data });
          if (item.data !== "[DONE]") text += JSON.parse(item.data).choices?.[0]?.delta?.content ?? "";
        }
      })();
      await eventually(async () => (text.length >= 3 * 20 ? true : undefined), 30_000);
      workers[0]!.kill("SIGKILL");
      await exited(workers[0]!);
      const cancel = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
      });
      expect(cancel.status).toBe(200);
      // No worker runs for a while after the cancel: it reaches nobody.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      workers.push(spawnWorker(platform, logs));
      await reading;

      expect(events.at(-1)?.data).toBe("[DONE]");
      const chunks = events.slice(0, -1).map((event) => JSON.parse(event.data));
      const error = chunks.at(-1).error;
      expect(error, `worker: ${logs.join("")}`).toMatchObject({ code: "completion_cancelled" });
      const usage = chunks.at(-2).usage;
      const delivered = text.length / 3;
      expect(text).toBe(countingReply(delivered));
      // Not generated on: a few hundred tokens were left; what the first worker delivered, nothing more.
      expect(delivered).toBeLessThan(200);
      // The prompt as counted without the engine's usage (it never sent one), and every delivered token.
      expect(usage.completion_tokens).toBe(delivered);
      expect(usage.prompt_tokens).toBeGreaterThan(0);
      expect(upstream.requests.filter((request) => request.continued)).toHaveLength(0);
      const recorded = await eventually(async () => {
        const found = await completionEvents(platform.deps.pool, completionId);
        return found.length ? found : undefined;
      }, 10_000);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]!.data).toMatchObject({ outcome: "cancelled", promptTokens: usage.prompt_tokens, completionTokens: delivered });
    } finally {
      for (const worker of workers) {
        worker.kill("SIGKILL");
        await exited(worker);
      }
      await platform.close();
      await upstream.close();
    }
  }, 90_000);
});
