import { context, propagation } from "@opentelemetry/api";
import type { Context } from "koa";
import type { EventMetadata } from "../../ledger/eventStore/types.ts";
import { stateOf } from "./requestState.ts";

/**
 * Metadata for the events a request appends: its request id as correlationId, the trace context
 * (when tracing is on) and who acted (`account:<id>`, `admin`). Never a secret.
 */
export function requestMetadata(ctx: Context, actor?: string): EventMetadata {
  const metadata: EventMetadata = {};
  const { requestId } = stateOf(ctx);
  if (typeof requestId === "string") metadata.correlationId = requestId;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  if (carrier.traceparent) metadata.traceparent = carrier.traceparent;
  if (actor) metadata.actor = actor;
  return metadata;
}
