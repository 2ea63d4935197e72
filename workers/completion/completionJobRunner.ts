import type { CompletionJob } from "../../src/messaging/completionJob.ts";
import type { JobError, Usage } from "../../src/messaging/deltaMessage.ts";
import { costMicroChf } from "../../src/inference/usage/costMicroChf.ts";
import type { RegisteredModel } from "../../src/models/registry/modelRegistry.ts";
import type { Logger } from "../../src/observability/logger.ts";
import { EngineError, type Engine } from "../engines/engine.ts";
import type { DeltaPublisher } from "./deltaPublisher.ts";
import type { UsageRecorder } from "./usageRecorder.ts";

export type CompletionJobRunnerDeps = {
  model: RegisteredModel;
  engine: Engine;
  usage: UsageRecorder;
  publisherFor: (completionId: string) => DeltaPublisher;
  now: () => Date;
  logger: Logger;
};

const NO_USAGE: Usage = { promptTokens: 0, completionTokens: 0, reasoningTokens: 0 };

/**
 * Runs one RunCompletion job: `started`, the engine's deltas (coalesced) or embeddings, `finish`, then the
 * usage is recorded in PostgreSQL and `usage` closes the feed; an engine failure records a failed
 * outcome (nothing charged) and closes the feed with `error`. Nobody listening (a client that went away)
 * changes nothing: the job runs to its end and its usage is recorded.
 */
export class CompletionJobRunner {
  readonly #deps: CompletionJobRunnerDeps;

  constructor(deps: CompletionJobRunnerDeps) {
    this.#deps = deps;
  }

  async run(job: CompletionJob, signal: AbortSignal): Promise<void> {
    const { engine, model, logger } = this.#deps;
    const publisher = this.#deps.publisherFor(job.completionId);
    const startedAt = this.#deps.now();
    publisher.send({ type: "started" });
    let usage: Usage = NO_USAGE;
    let failure: JobError | null = null;
    try {
      if (job.work.kind === "chat") {
        const result = await engine.chat(job.work.request, (delta) => publisher.delta(delta), signal);
        publisher.send({ type: "finish", finishReason: result.finishReason });
        usage = result.usage;
      } else {
        const result = await engine.embed(job.work.input, signal);
        publisher.send({ type: "embeddings", embeddings: result.embeddings });
        usage = { promptTokens: result.promptTokens, completionTokens: 0, reasoningTokens: 0 };
      }
    } catch (error) {
      failure = toJobError(error);
      if (failure.kind === "internal") logger.error("engine failed", { completionId: job.completionId, model: job.model, error: error as Error });
    }
    const charged = failure ? NO_USAGE : usage;
    try {
      await this.#deps.usage.record(
        {
          completionId: job.completionId,
          accountId: job.accountId,
          keyId: job.keyId,
          model: job.model,
          endpoint: job.endpoint,
          promptTokens: charged.promptTokens,
          completionTokens: charged.completionTokens,
          reasoningTokens: charged.reasoningTokens,
          costMicroChf: costMicroChf(charged, model),
          priceTableVersion: model.priceTableVersion,
          outcome: failure ? "failed" : "completed",
          startedAt: startedAt.toISOString(),
          finishedAt: this.#deps.now().toISOString(),
          traceId: traceIdOf(job.traceparent),
        },
        { correlationId: job.completionId, actor: "worker", ...(job.traceparent ? { traceparent: job.traceparent } : {}) },
      );
    } catch (error) {
      logger.error("could not record usage", { completionId: job.completionId, error: error as Error });
      failure ??= { kind: "internal", message: "The usage of this request could not be recorded.", param: null };
    }
    publisher.send(failure ? { type: "error", error: failure } : { type: "usage", usage });
    await publisher.close();
  }
}

function toJobError(error: unknown): JobError {
  if (error instanceof EngineError) {
    return { kind: error.kind, message: error.kind === "internal" ? "The model failed while generating." : error.message, param: error.param };
  }
  return { kind: "internal", message: "The model failed while generating.", param: null };
}

/** The trace id of a W3C traceparent (`00-<trace-id>-<span-id>-<flags>`). */
function traceIdOf(traceparent: string | undefined): string | null {
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent ?? "");
  return match ? match[1]! : null;
}
