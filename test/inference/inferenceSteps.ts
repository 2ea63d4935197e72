import type { Pool } from "../../src/db/createPool.ts";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";

export type RecordedUsage = { type: string; data: UsageRecordedData; metadata: Record<string, unknown> };

/** The events of a completion's stream (`completion-<id>`). */
export async function completionEvents(pool: Pool, completionId: string): Promise<RecordedUsage[]> {
  const rows = await pool.query<{ event_type: string; data: UsageRecordedData; metadata: Record<string, unknown> }>(
    "SELECT event_type, data, metadata FROM es_events WHERE stream_id = $1 ORDER BY stream_version",
    [`completion-${completionId}`],
  );
  return rows.rows.map((r) => ({ type: r.event_type, data: r.data, metadata: r.metadata }));
}

export type SseEvent = { id: string | undefined; data: string };

/**
 * Parses a raw text/event-stream body into its events (blank-line separated; id and data fields),
 * skipping what SSE clients do not dispatch: comment lines (queue position, keep-alive) and `retry:`.
 */
export function parseSse(text: string): SseEvent[] {
  return text
    .split("\n\n")
    .filter((block) => block.split("\n").some((line) => line.startsWith("data: ")))
    .map((block) => {
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      return { id, data: data.join("\n") };
    });
}
