import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { JobError, Usage } from "../../src/contracts/deltaMessage.ts";
import type { Logger } from "../../src/observability/logger.ts";
import type { ChatRequest, Engine } from "../engines/engine.ts";
import type { DeltaPublisher } from "./deltaPublisher.ts";
import { deliveredTokens, foldDelivered, type ResumePoint } from "./resumption.ts";
import type { SentOutput } from "./sentDeltas.ts";
import type { UsageRecorder } from "./usageRecorder.ts";

// What CompletionJobRunner charges a run with: whether a failed run is charged at all, the usage already
// recorded for its completion, and what the deltas sent up to a number held.

/** Nothing charged. */
export const NO_USAGE: Usage = { promptTokens: 0, completionTokens: 0, reasoningTokens: 0 };

/**
 * A batch line's job that ended for the platform's reason (the engine failed or went away, its workers
 * died too often, its reply could not be continued): charged nothing, since no client receives a batch
 * line's partial reply and the line is run again (a cancel, or the line's own invalid request, is charged
 * as for any request).
 */
export function unchargedBatchFailure(job: CompletionJob, failure: JobError): boolean {
  return job.lane === "batch" && (failure.kind === "internal" || failure.kind === "unavailable");
}

/**
 * A run that failed for the platform's or the engine's reason (not a cancel, not the request's own 400)
 * of a request answered whole (a chat, text completion or embeddings request not streamed, in the
 * interactive lane): its client gets the error and none of the reply, so nothing is charged for it
 * ("never charge what was not delivered"). Its usage is recorded at zero, settling its hold. A stream's
 * failure charges what it delivered; a background response's partial output is kept for its owner to read.
 */
export function unchargedWholeAnswerFailure(job: CompletionJob, failure: JobError): boolean {
  const answeredWhole = job.streamed === false && (job.lane ?? "interactive") === "interactive" && job.endpoint !== "responses";
  return answeredWhole && (failure.kind === "internal" || failure.kind === "unavailable");
}

/** The usage recorded for a completion (its token counts), or null when none is or it cannot be read. */
export async function usageOf(recorder: UsageRecorder, completionId: string): Promise<Usage | null> {
  const recorded = await recorder.recorded(completionId).catch(() => null);
  return recorded ? { promptTokens: recorded.promptTokens, completionTokens: recorded.completionTokens, reasoningTokens: recorded.reasoningTokens } : null;
}

/** What a run generated (what earlier runs delivered included), as it is charged. */
export type Generated = SentOutput;

/**
 * What the job's deltas numbered up to `seq` hold: those earlier runs wrote (read back when this run
 * resumed) and those this run wrote (merged deltas as the one message each became), each with the token
 * count it was written with.
 */
export function sentThrough(point: ResumePoint, publisher: DeltaPublisher, seq: number): Generated {
  const earlier = foldDelivered((point.replayed ?? []).filter((m) => m.seq < point.nextSeq && m.seq <= seq));
  const sent = publisher.sentThrough(seq);
  return {
    output: earlier.content !== "" || earlier.toolText !== "" || sent.output,
    reasoning: earlier.reasoning + sent.reasoning,
    tokens: earlier.tokens + sent.tokens,
    uncounted: earlier.uncounted + sent.uncounted,
  };
}

/**
 * Tokens a failed chat job had generated (and its prompt), so they are charged; 0 when nothing came
 * out. As counted when generated where the deltas carry counts, never more than `maxTokens`.
 */
export async function usageBeforeFailure(deps: { engine: Engine; logger: Logger }, job: CompletionJob, generated: Generated): Promise<Usage> {
  if (job.work.kind !== "chat" || (!generated.output && generated.reasoning === "" && generated.tokens === 0)) return NO_USAGE;
  const request: ChatRequest = job.work.request;
  try {
    const tokens = await deliveredTokens((text) => deps.engine.countTokens(text), request.maxTokens, generated);
    return { promptTokens: await deps.engine.countChatTokens(request.messages, request.tools), ...tokens };
  } catch (error) {
    deps.logger.warn("could not count the tokens of a failed job", { completionId: job.completionId, error: error as Error });
    return NO_USAGE;
  }
}
