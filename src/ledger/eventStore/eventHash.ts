import { hash } from "node:crypto";
import { canonicalJson } from "./canonicalJson.ts";

/** What an event's hash covers; `prevHash` is the hash of the stream's previous event (null for the first). */
export type HashedEventFields = {
  prevHash: string | null;
  streamId: string;
  streamVersion: number;
  eventId: string;
  type: string;
  schemaVersion: number;
  data: unknown;
  metadata: unknown;
  /** ISO 8601 UTC with milliseconds (Date.prototype.toISOString), as stored in recorded_at. */
  recordedAt: string;
};

/**
 * The chain hash of one event: lowercase hex SHA-256 of the UTF-8 bytes of the RFC 8785 canonical JSON
 * of the object { prevHash, streamId, streamVersion, eventId, type, schemaVersion, data, metadata,
 * recordedAt }. data and metadata are hashed as they read back from PostgreSQL (jsonb reorders keys and
 * normalises numbers, the canonical form is the same either way).
 */
export function eventHash(fields: HashedEventFields): string {
  const canonical = canonicalJson({
    prevHash: fields.prevHash,
    streamId: fields.streamId,
    streamVersion: fields.streamVersion,
    eventId: fields.eventId,
    type: fields.type,
    schemaVersion: fields.schemaVersion,
    data: fields.data,
    metadata: fields.metadata,
    recordedAt: fields.recordedAt,
  });
  return hash("sha256", canonical, "hex");
}
