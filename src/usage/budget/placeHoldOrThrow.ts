import type { Queryable } from "../../eventStore/types.ts";
import { budgetRefusalError } from "./budgetRefusalError.ts";
import { placeHold, type HoldPlaced, type PlaceHoldInput } from "./placeHold.ts";

/** Admission in one call for the inference handlers: places the hold or throws the 429 (or 402) ApiError. */
export async function placeHoldOrThrow(db: Queryable, input: PlaceHoldInput): Promise<HoldPlaced> {
  const result = await placeHold(db, input);
  if (!result.ok) throw budgetRefusalError(result);
  return result;
}
