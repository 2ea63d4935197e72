import type { ChildProcess } from "node:child_process";
import type OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { SseReader } from "../inference/sseReader.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform } from "../support/testPlatform.ts";
import { openHolds } from "../usage/usageFixtures.ts";
import { countingReply, startCountingUpstream, countingModel } from "./countingUpstream.ts";
import { exited, spawnWorker } from "./workerCrashScenario.ts";

const MODEL = "counting-model";
const PROMPT_TOKENS = 20;
const TOKENS = 60;
const KILL_AFTER_TOKENS = 15;

type Event = { type: string; sequence_number: number } & Record<string, unknown>;

const textOf = (events: Event[]) =>
  events
    .filter((e) => e.type === "response.output_text.delta")
    .map((e) => e.delta)
    .join("");

/**
 * A background response (official openai SDK) whose worker process is killed with SIGKILL mid-generation:
 * its client had dropped its stream; a second worker process continues the job from the tokens delivered
 * (countingUpstream continues a final assistant message), and the client picks the stream up again with
 * retrieve(stream, starting_after). One coherent output: every sequence number once across both
 * connections, the deltas equal to the final output_text, the reply exactly the counting model's; one
 * UsageRecorded (endpoint `responses`) for the tokens delivered, the prompt once; no hold left.
 */
describe("a background response whose worker is killed mid-generation", () => {
  it("completes as one coherent output, charged once", async () => {
    const upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 60, promptTokens: PROMPT_TOKENS });
    const model = countingModel(upstream, { id: MODEL, maxConcurrency: 8, continueFinalMessage: true });
    const platform = await startTestPlatform({ startWorker: false, models: () => [model], env: { JOB_IDLE_TIMEOUT_MS: "45000", DELTA_COALESCE_MS: "0" } });
    const workers: ChildProcess[] = [];
    const logs: string[] = [];
    try {
      const { key, account } = await platform.createKey();
      const openai = platform.openai(key);
      const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
      const first = spawnWorker(platform, logs);
      workers.push(first);
      await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);

      const queued = await openai.responses.create({ model: MODEL, input: "Count.", background: true, max_output_tokens: TOKENS + 100, temperature: 0 });
      expect(queued.status).toBe("queued");

      // The client follows it, then drops its stream once the reply is well under way.
      const controller = new AbortController();
      const live = await fetch(`${platform.baseUrl}/v1/responses/${queued.id}?stream=true`, {
        headers: { authorization: `Bearer ${key}` },
        signal: controller.signal,
      });
      const reader = new SseReader(live);
      const head: Event[] = [];
      while (textOf(head).length < 3 * KILL_AFTER_TOKENS) {
        const item = await reader.next();
        if (!item) throw new Error(`the stream ended early; worker: ${logs.join("")}`);
        if (item.data !== undefined) head.push(JSON.parse(item.data) as Event);
      }
      controller.abort();
      await reader.cancel();

      first.kill("SIGKILL");
      await exited(first);
      expect(head.some((e) => e.type === "response.completed")).toBe(false);
      workers.push(spawnWorker(platform, logs));

      // Picked up again after the last event it had.
      const last = head.at(-1)!.sequence_number;
      const resumed = await openai.responses.retrieve(queued.id, { stream: true, starting_after: last });
      const rest: Event[] = [];
      for await (const event of resumed) rest.push(event as unknown as Event);
      const all = [...head, ...rest];
      expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
      expect(all.filter((e) => e.type === "response.failed")).toEqual([]);
      const final = (rest.at(-1) as unknown as OpenAI.Responses.ResponseCompletedEvent).response;
      expect(rest.at(-1)!.type).toBe("response.completed");
      const expected = countingReply(TOKENS);
      expect(textOf(all)).toBe(expected);
      expect((final.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0]).toMatchObject({ text: expected });

      const done = await eventually(async () => {
        const response = await openai.responses.retrieve(queued.id);
        return response.status === "completed" ? response : undefined;
      }, 20_000);
      expect(done.output_text).toBe(expected);
      expect(done.usage).toMatchObject({ input_tokens: PROMPT_TOKENS, output_tokens: TOKENS, total_tokens: PROMPT_TOKENS + TOKENS });
      // The second worker continued it from what was delivered, never from the start.
      const continued = upstream.requests.filter((r) => r.continued);
      expect(continued).toHaveLength(1);
      expect(continued[0]!.continuedFrom).toBeGreaterThanOrEqual(KILL_AFTER_TOKENS);

      const events = await completionEvents(platform.deps.pool, queued.id);
      expect(events).toHaveLength(1);
      expect(events[0]!.data).toMatchObject({
        endpoint: "responses",
        outcome: "finished",
        promptTokens: PROMPT_TOKENS,
        completionTokens: TOKENS,
        costMicroChf: costMicroChf(
          { promptTokens: PROMPT_TOKENS, completionTokens: TOKENS },
          { inputMicroChfPerMillion: 1_000_000, outputMicroChfPerMillion: 2_000_000 },
        ),
      });
      await eventually(async () => ((await openHolds(platform.deps.pool, account.accountId)) === 0 ? true : undefined), 10_000);
    } finally {
      for (const worker of workers) {
        worker.kill("SIGKILL");
        await exited(worker);
      }
      await platform.close();
      await upstream.close();
    }
  }, 120_000);
});
