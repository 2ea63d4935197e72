import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";

/**
 * A completion's last message that says it failed (not by its owner's cancel, nor for its request) and
 * charged nothing: also one stopped because the API ended its request early (`lost`: a whole answer's
 * process shutting down answered 503 "Retry it"), not a cancel of its owner or of nobody listening.
 */
export function failedUncharged(last: DeltaMessage): boolean {
  if (last.type !== "error") return false;
  const passing = last.error.kind === "unavailable" || last.error.kind === "internal" || (last.error.kind === "cancelled" && last.error.code === "lost");
  return passing && (!last.usage || last.usage.promptTokens + last.usage.completionTokens === 0);
}
