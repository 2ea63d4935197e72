import { isTerminal } from "../../../../contracts/deltaMessage.ts";
import type { CompletionRecords } from "../../jobs/completionRecords.ts";

/**
 * How long the replay stream of a response that is not stored (`store: false`) is kept after its end, in
 * seconds (the job carries it: its worker sets it with its last message), instead of the retention: long
 * enough for its API process to read the last messages, not for anybody to read its text later.
 */
export const UNSTORED_REPLAY_KEPT_S = 60;

/** How long a deleted response that was running is watched for its job's last messages (then dropped all the same). */
const RUNNING_WATCH_MS = 60_000;
const WATCH_STEP_MS = 1_000;

/**
 * A deleted response's events leave Redis too (its replay stream, which holds its text; its record, which
 * holds only its owner, model and times, stays for an Idempotency-Key retry to be told it is gone):
 * at once, and, when its job was still running, again once that job wrote its last message (the worker
 * stopping it writes what it generated meanwhile and its end), watched for at most a minute. Never
 * rejects: a Redis that does not answer leaves them to their retention.
 */
export async function discardResponseReplay(records: CompletionRecords, responseId: string, running: boolean): Promise<void> {
  const discard = () => records.discardReplay(responseId).catch(() => undefined);
  await discard();
  if (!running) return;
  void (async () => {
    for (let waited = 0; waited < RUNNING_WATCH_MS; waited += WATCH_STEP_MS) {
      await new Promise((resolve) => setTimeout(resolve, WATCH_STEP_MS).unref());
      const last = await records.lastMessage(responseId).catch(() => undefined);
      if (last && isTerminal(last)) break;
    }
    await discard();
  })();
}
