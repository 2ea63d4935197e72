import { randomUUID } from "node:crypto";
import type { Pool } from "../../src/db/createPool.ts";
import type { EventMetadata } from "../../src/eventStore/types.ts";
import {
  COMPLETION_STREAM_TYPE,
  completionStreamId,
  UsageRecordedDataSchema,
  type UsageRecorded,
  type UsageRecordedData,
} from "../../src/inference/usage/usageRecordedEvent.ts";

const APPEND_NEW_STREAM = `
  WITH created AS (
    INSERT INTO es_streams (stream_id, stream_type, version) VALUES ($1, $2, 1)
    ON CONFLICT (stream_id) DO NOTHING
    RETURNING stream_id
  )
  INSERT INTO es_events (stream_id, stream_version, event_id, event_type, schema_version, data, metadata)
  SELECT stream_id, 1, $3, $4, 1, $5::jsonb, $6::jsonb FROM created
  RETURNING global_position`;

/**
 * Appends UsageRecorded to `completion-<id>` with expected version "no_stream": the stream exists only
 * once, so a job that runs again (retry, stalled job) can never record, and so charge, twice.
 *
 * It is the event store's append for the one case of a new one-event stream, as a single statement
 * (one round trip instead of a five-statement transaction, since every completion ends with it): the
 * stream row is created only if absent, and the event is inserted only when it was. No row back means
 * the stream already existed (the ConcurrencyError of appendToStream): already recorded.
 * Transient database errors are retried a few times.
 */
export class UsageRecorder {
  readonly #pool: Pool;
  readonly #retries: number;

  constructor(pool: Pool, options: { retries?: number } = {}) {
    this.#pool = pool;
    this.#retries = options.retries ?? 3;
  }

  async record(data: UsageRecordedData, metadata: EventMetadata): Promise<"recorded" | "already_recorded"> {
    const event: UsageRecorded = { type: "UsageRecorded", data: UsageRecordedDataSchema.parse(data) };
    const eventId = randomUUID();
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.#pool.query(APPEND_NEW_STREAM, [
          completionStreamId(data.completionId),
          COMPLETION_STREAM_TYPE,
          eventId,
          event.type,
          JSON.stringify(event.data),
          JSON.stringify(metadata),
        ]);
        if (!result.rowCount) return "already_recorded";
        return "recorded";
      } catch (error) {
        if (attempt >= this.#retries) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
      }
    }
  }
}
