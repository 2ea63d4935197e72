import { UsageRecordedSchema, type UsageRecorded as ContractUsageRecorded } from "../../usage/usageRecordedEvent.ts";

/**
 * The pipeline's names for the one UsageRecorded contract (src/usage/usageRecordedEvent.ts): there is a
 * single schema, shared with the budget settlement and the projections.
 */
export { COMPLETION_STREAM_TYPE, completionStreamId } from "../../usage/usageRecordedEvent.ts";

/** What one completion cost: appended once to `completion-<id>` at the end of its job. */
export const UsageRecordedDataSchema = UsageRecordedSchema.shape.data;

export type UsageRecordedData = ContractUsageRecorded["data"];
export type UsageRecorded = ContractUsageRecorded;
