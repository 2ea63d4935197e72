import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResponseStore } from "../../src/api/inference/endpoints/responses/responseStore.ts";
import { countingModel, startCountingUpstream, type CountingUpstream } from "./countingUpstream.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";

const MODEL = "counting-model";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A response cancelled while its stream is read: its owner's cancel marks the row `cancelled` at once,
 * and the run writes the output and usage once the job has stopped, a moment after the stream's last
 * event. A GET in that moment answered `cancelled` with no output and no usage (seen by a probe in 4 of
 * 20 tries): it answers what the stream ended with.
 */
describe("GET /v1/responses/{id} right after a cancelled stream ended (openai SDK)", () => {
  let upstream: CountingUpstream;
  let platform: TestPlatform;
  let openai: OpenAI;
  let store: ResponseStore;
  beforeAll(async () => {
    upstream = await startCountingUpstream({ totalTokens: 200, tokenDelayMs: 20, promptTokens: 10 });
    platform = await startTestPlatform({ models: () => [countingModel(upstream, { id: MODEL, maxConcurrency: 4 })] });
    openai = platform.openai((await platform.createKey()).key, { maxRetries: 0 });
    store = platform.inference.responses.store;
  });
  afterAll(async () => {
    await platform?.close();
    await upstream?.close();
  });

  it("answers the output and usage the stream ended with, before and after the row has them", async () => {
    // The run writes the result 1.5 s after the stream's last event here, so the GET comes first.
    const finish = store.finish.bind(store);
    store.finish = async (...args) => {
      await sleep(1_500);
      return finish(...args);
    };
    try {
      const stream = await openai.responses.create({ model: MODEL, input: "Count.", max_output_tokens: 150, stream: true });
      let id = "";
      let deltas = 0;
      let cancelled: Promise<unknown> | null = null;
      let last: OpenAI.Responses.ResponseStreamEvent | null = null;
      for await (const event of stream) {
        last = event;
        if (event.type === "response.created") id = event.response.id;
        if (event.type === "response.output_text.delta" && ++deltas === 5) cancelled = openai.responses.cancel(id);
      }
      expect(last?.type).toBe("response.failed");
      const final = (last as OpenAI.Responses.ResponseFailedEvent).response;
      expect(final.status).toBe("cancelled");
      expect(final.usage?.output_tokens).toBeGreaterThanOrEqual(5);
      const finalText = final.output
        .flatMap((item) => (item.type === "message" ? item.content : []))
        .map((part) => (part.type === "output_text" ? part.text : ""));
      const read = await openai.responses.retrieve(id);
      expect({ status: read.status, usage: read.usage, text: read.output_text }).toEqual({ status: "cancelled", usage: final.usage, text: finalText.join("") });
      expect(read.output_text.length).toBeGreaterThan(0);
      await cancelled;
      // Once written, the same from the row.
      const stored = await openai.responses.retrieve(id);
      expect({ status: stored.status, usage: stored.usage, text: stored.output_text }).toEqual({
        status: "cancelled",
        usage: final.usage,
        text: read.output_text,
      });
    } finally {
      store.finish = finish;
    }
  });
});
