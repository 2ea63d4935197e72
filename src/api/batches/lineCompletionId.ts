import type { BatchEndpoint } from "./batchObject.ts";

const PREFIX: Record<BatchEndpoint, string> = {
  "/v1/chat/completions": "chatcmpl",
  "/v1/completions": "cmpl",
  "/v1/embeddings": "embd",
  "/v1/responses": "resp",
};

/**
 * The completion id of a batch line: the same every time the line is dispatched (after an API restart,
 * or a lost queue entry), so a dispatch again attaches to its job, and UsageRecorded's append-once rule
 * on `completion-<id>` charges it once. No ':' (a BullMQ job id).
 */
export function lineCompletionId(endpoint: BatchEndpoint, batchId: string, line: number): string {
  // OpenAI's own forms: `chatcmpl-...`, `cmpl-...`, but `resp_...`.
  const separator = endpoint === "/v1/responses" ? "_" : "-";
  return `${PREFIX[endpoint]}${separator}${batchId.replace(/[^A-Za-z0-9]/g, "")}L${line}`;
}
