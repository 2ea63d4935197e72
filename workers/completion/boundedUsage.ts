import type { CompletionWork } from "../../src/contracts/completionJob.ts";
import type { Usage } from "../../src/contracts/deltaMessage.ts";
import { promptTokensUpperBound } from "../../src/ledger/pricing/promptTokensUpperBound.ts";

/**
 * An engine's usage, held within what the request can have used: the prompt within the bound its budget
 * hold was placed with (promptTokensUpperBound of the same request, as admission computes it), the
 * completion within `maxTokens`, reasoning within the completion. An embedded engine counts within them
 * by construction; an upstream server's report is not trusted beyond them (one reporting millions of
 * tokens for a short reply would be charged past the hold, and the account past its budget).
 */
export function boundedUsage(work: CompletionWork, usage: Usage, contextLength: number): Usage {
  if (work.kind === "embeddings") {
    const promptBound = work.input.reduce((sum, text) => sum + promptTokensUpperBound([text], contextLength), 0);
    return { promptTokens: Math.min(usage.promptTokens, promptBound), completionTokens: 0, reasoningTokens: 0 };
  }
  const completionTokens = Math.min(usage.completionTokens, work.request.maxTokens);
  return {
    promptTokens: Math.min(usage.promptTokens, promptTokensUpperBound([work.request], contextLength)),
    completionTokens,
    reasoningTokens: Math.min(usage.reasoningTokens, completionTokens),
  };
}

/** Whether bounding changed the usage (the engine reported more than the request can have used). */
export function wasBounded(reported: Usage, bounded: Usage): boolean {
  return (
    reported.promptTokens !== bounded.promptTokens ||
    reported.completionTokens !== bounded.completionTokens ||
    reported.reasoningTokens !== bounded.reasoningTokens
  );
}
