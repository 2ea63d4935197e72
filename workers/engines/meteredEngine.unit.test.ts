import { describe, expect, it } from "vitest";
import type { EngineChatRequest } from "../../src/contracts/engineRequestSchemas.ts";
import { createMetrics } from "../../src/observability/metrics.ts";
import { type Engine, EngineError } from "./engine.ts";
import { meteredEngine } from "./meteredEngine.ts";

/** An engine that sends two deltas of one token each, then ends as `end` says. */
function twoTokensThen(end: (signal: AbortSignal) => Promise<never> | "finish", reported = { promptTokens: 5, completionTokens: 2 }): Engine {
  return {
    capabilities: () => {
      throw new Error("not used");
    },
    async chat(_request, onDelta, signal) {
      onDelta({ content: "a", tokens: 1 });
      onDelta({ content: "b", tokens: 1 });
      const ending = end(signal);
      if (ending === "finish") return { finishReason: "stop", usage: { ...reported, reasoningTokens: 0 } };
      return ending;
    },
    embed: async (texts) => ({ embeddings: texts.map(() => [1]), promptTokens: reported.promptTokens }),
    countChatTokens: async () => 7,
    countTokens: async () => 0,
    maxConcurrency: () => 1,
    close: async () => undefined,
  };
}

const request = {} as EngineChatRequest;

async function metricText(metrics: ReturnType<typeof createMetrics>): Promise<string> {
  return (await metrics.scrape()).body;
}

describe("meteredEngine", () => {
  it("counts a call its job stopped as aborted (whatever the engine threw), with the tokens its deltas counted", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    class JobCancelledError extends Error {
      override name = "JobCancelledError";
    }
    const engine = meteredEngine(
      twoTokensThen((signal) => Promise.reject(signal.reason)),
      "m",
      metrics.inference,
      4096,
    );
    const controller = new AbortController();
    controller.abort(new JobCancelledError("cancelled by its owner"));
    await expect(engine.chat(request, () => undefined, controller.signal)).rejects.toBeInstanceOf(JobCancelledError);
    const text = await metricText(metrics);
    expect(text).toContain('inference_engine_errors_total{model="m",kind="aborted"} 1');
    expect(text).not.toContain('kind="internal"');
    expect(text).toContain('inference_output_tokens_total{model="m"} 2');
    // Its prompt was processed (and is charged): counted too, as the engine counts it.
    await expect.poll(async () => await metricText(metrics)).toContain('inference_input_tokens_total{model="m"} 7');
  });

  it("counts an engine's own failure by its kind, and a plain error as internal", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const refused = meteredEngine(
      twoTokensThen(() => Promise.reject(new EngineError("invalid_request", "no"))),
      "m",
      metrics.inference,
      4096,
    );
    await expect(refused.chat(request, () => undefined, new AbortController().signal)).rejects.toThrow("no");
    const broken = meteredEngine(
      twoTokensThen(() => Promise.reject(new Error("boom"))),
      "m",
      metrics.inference,
      4096,
    );
    await expect(broken.chat(request, () => undefined, new AbortController().signal)).rejects.toThrow("boom");
    const ok = meteredEngine(
      twoTokensThen(() => "finish"),
      "m",
      metrics.inference,
      4096,
    );
    await ok.chat(request, () => undefined, new AbortController().signal);
    const text = await metricText(metrics);
    expect(text).toContain('inference_engine_errors_total{model="m",kind="invalid_request"} 1');
    expect(text).toContain('inference_engine_errors_total{model="m",kind="internal"} 1');
    expect(text).toContain('inference_output_tokens_total{model="m"} 6');
    // The two failed calls had generated: their prompts (7 each, charged with their tokens) count as the finished one's (5).
    await expect.poll(async () => await metricText(metrics)).toContain('inference_input_tokens_total{model="m"} 19');
  });

  it("counts an upstream's absurd usage within what the call can have used: the context, max_tokens, the deltas", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const absurd = meteredEngine(
      twoTokensThen(() => "finish", { promptTokens: 1e12, completionTokens: 1e12 }),
      "m",
      metrics.inference,
      4096,
    );
    await absurd.chat({ maxTokens: 10 } as EngineChatRequest, () => undefined, new AbortController().signal);
    await absurd.embed(["a", "b"], new AbortController().signal);
    const text = await metricText(metrics);
    expect(text).toContain('inference_output_tokens_total{model="m"} 10');
    expect(text).toContain(`inference_input_tokens_total{model="m"} ${4096 + 2 * 4096}`);
  });
});
