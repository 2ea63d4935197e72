import { InvalidRequestError } from "../../../http/errors.ts";
import type { InferenceServices } from "../shared/requireInference.ts";
import type { StoredItem } from "./responseItems.ts";
import { TERMINAL_STATUSES } from "./responseObject.ts";
import { settledFromReplay } from "./responseStreams.ts";

/** The context a previous_response_id gives: its own context, input and output (its owner's only, and ended). */
export async function previousContext(inference: InferenceServices, accountId: string, previousId: string | null | undefined): Promise<StoredItem[]> {
  if (!previousId) return [];
  const found = await inference.responses.store.find(accountId, previousId);
  // Ended, but not stored as ended yet (the process that followed it was killed): stored now.
  const previous = found && (await settledFromReplay(inference, found));
  if (!previous) {
    throw new InvalidRequestError(`Previous response with id '${previousId}' not found.`, {
      param: "previous_response_id",
      code: "previous_response_not_found",
    });
  }
  if (!TERMINAL_STATUSES.has(previous.state.status)) {
    throw new InvalidRequestError(`Previous response with id '${previousId}' is still ${previous.state.status}.`, {
      param: "previous_response_id",
      code: "invalid_value",
    });
  }
  return [...previous.contextItems, ...previous.inputItems, ...previous.state.output];
}
