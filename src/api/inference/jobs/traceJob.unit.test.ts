import { describe, expect, it } from "vitest";
import type { DeltaMessage, Usage } from "../../../contracts/deltaMessage.ts";
import { ModelUnavailableError } from "../../http/errors.ts";
import { errorName, traceRelay } from "./traceJob.ts";

/** A job that answers `messages` in order. */
function jobOf(messages: DeltaMessage[]) {
  let at = 0;
  return { completionId: "chatcmpl-1", next: async () => messages[at++]!, release: () => undefined };
}

async function relayed(messages: DeltaMessage[]): Promise<Usage[]> {
  const told: Usage[] = [];
  const job = traceRelay(jobOf(messages), { model: "m", endpoint: "chat.completions", completionId: "chatcmpl-1", lane: "interactive" }, (u) => told.push(u));
  for (let i = 0; i < messages.length; i++) await job.next();
  job.release();
  return told;
}

const usage = { promptTokens: 16, completionTokens: 4, reasoningTokens: 0 };

describe("traceRelay", () => {
  it("tells the usage of a reply that ended", async () => {
    expect(
      await relayed([
        { seq: 0, type: "started" },
        { seq: 1, type: "delta", delta: { content: "Hi" }, tokens: 4 },
        { seq: 2, type: "finish", finishReason: "stop" },
        { seq: 3, type: "usage", usage },
      ]),
    ).toEqual([usage]);
  });

  it("tells the usage a cancelled job charged (its error carries it), as the client is told it", async () => {
    expect(
      await relayed([
        { seq: 0, type: "started" },
        { seq: 1, type: "delta", delta: { content: "Hi" }, tokens: 4 },
        { seq: 2, type: "error", error: { kind: "cancelled", message: "cancelled", param: null }, usage },
      ]),
    ).toEqual([usage]);
    // A failure that names no usage tells none.
    expect(await relayed([{ seq: 0, type: "error", error: { kind: "internal", message: "x", param: null } }])).toEqual([]);
  });
});

describe("errorName (an enqueue span's error status)", () => {
  it("tells a full queue from a model without a worker, and names a plain error by its name", () => {
    expect(errorName(new ModelUnavailableError("full", "queue_full"))).toBe("ModelUnavailableError: queue_full");
    expect(errorName(new ModelUnavailableError("none"))).toMatch(/^ModelUnavailableError(: model_unavailable)?$/);
    expect(errorName(new TypeError("x"))).toBe("TypeError");
  });
});
