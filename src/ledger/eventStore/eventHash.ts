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
  return hash("sha256", canonicalEventJson(fields), "hex");
}

/**
 * canonicalJson of the hashed object, its members written directly in their sorted order (data,
 * eventId, metadata, prevHash, recordedAt, schemaVersion, streamId, streamVersion, type) instead of
 * sorting nine keys per event: the verifier hashes every event of the log. Same text as canonicalJson
 * (test/eventStore/eventHash.test.ts compares them).
 */
export function canonicalEventJson(fields: HashedEventFields): string {
  let out = "";
  const member = (name: string, value: unknown) => {
    if (value === undefined) return;
    out += `${out ? "," : ""}"${name}":${canonicalJson(value)}`;
  };
  member("data", fields.data);
  member("eventId", fields.eventId);
  member("metadata", fields.metadata);
  member("prevHash", fields.prevHash);
  member("recordedAt", fields.recordedAt);
  member("schemaVersion", fields.schemaVersion);
  member("streamId", fields.streamId);
  member("streamVersion", fields.streamVersion);
  member("type", fields.type);
  return `{${out}}`;
}
