import type { CompletionJob, CompletionWork } from "../../src/contracts/completionJob.ts";
import type { Logger } from "../../src/observability/logger.ts";
import type { Usage } from "../../src/contracts/deltaMessage.ts";
import { chatPromptTokensUpperBound, promptTokensUpperBound } from "../../src/ledger/pricing/promptTokensUpperBound.ts";

/**
 * An engine's usage, held within what the request can have used: the prompt within the bound its budget
 * hold was placed with (promptTokensUpperBound of the same request, as admission computes it), the
 * completion within `maxTokens`, reasoning within the completion. An embedded engine counts within them
 * by construction; an upstream server's report is not trusted beyond them (one reporting millions of
 * tokens for a short reply would be charged past the hold, and the account past its budget). A warning is
 * logged when it reported more.
 */
export function boundedUsage(job: CompletionJob, reported: Usage, contextLength: number, logger: Logger): Usage {
  const usage = withinBounds(job.work, reported, contextLength);
  if (
    usage.promptTokens !== reported.promptTokens ||
    usage.completionTokens !== reported.completionTokens ||
    usage.reasoningTokens !== reported.reasoningTokens
  ) {
    logger.warn("the engine reported more tokens than the request can have used: charged within its bounds", {
      completionId: job.completionId,
      reported: JSON.stringify(reported),
      charged: JSON.stringify(usage),
    });
  }
  return usage;
}

/** The usage held within the request's bounds (see boundedUsage). */
export function withinBounds(work: CompletionWork, usage: Usage, contextLength: number): Usage {
  if (work.kind === "embeddings") {
    const promptBound = work.input.reduce((sum, text) => sum + promptTokensUpperBound([text], contextLength), 0);
    return { promptTokens: Math.min(usage.promptTokens, promptBound), completionTokens: 0, reasoningTokens: 0 };
  }
  const completionTokens = Math.min(usage.completionTokens, work.request.maxTokens);
  return {
    promptTokens: Math.min(usage.promptTokens, chatPromptTokensUpperBound(work.request, contextLength)),
    completionTokens,
    reasoningTokens: Math.min(usage.reasoningTokens, completionTokens),
  };
}
