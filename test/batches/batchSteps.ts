import { expect } from "vitest";
import type OpenAI from "openai";
import type { FileStore } from "../../src/api/files/fileStore.ts";
import type { Pool } from "../../src/db/createPool.ts";
import { eventually } from "../support/eventually.ts";

export type BatchLine = { custom_id: string; method: string; url: string; body: Record<string, unknown> };

export function chatLine(i: number, model: string, maxTokens = 4): BatchLine {
  return {
    custom_id: `req-${i}`,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model, messages: [{ role: "user", content: `Say ${i}` }], max_tokens: maxTokens },
  };
}

/**
 * An input file of `lines` (raw strings taken as they are). Stored through the FileStore the app uses
 * (`deps.files`): in this branch the test support's store, once the Files API is merged its store (then
 * the SDK's files.create can replace this step).
 */
export async function uploadBatchFile(files: FileStore, accountId: string, lines: (BatchLine | string)[]): Promise<string> {
  const text = lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n");
  const file = await files.create({
    accountId,
    purpose: "batch",
    filename: "input.jsonl",
    content: (async function* () {
      yield Buffer.from(text);
    })(),
    maxBytes: 200 * 1024 * 1024,
    maxLines: 50_000,
  });
  return file.id;
}

export async function readJsonl(files: FileStore, accountId: string, fileId: string): Promise<any[]> {
  const content = await files.open(accountId, fileId);
  if (!content) throw new Error(`no file ${fileId}`);
  const parts: Buffer[] = [];
  for await (const chunk of content) parts.push(chunk);
  return Buffer.concat(parts)
    .toString("utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

export async function waitForStatus(openai: OpenAI, batchId: string, statuses: string[], timeoutMs = 60_000): Promise<OpenAI.Batches.Batch> {
  return eventually(async () => {
    const batch = await openai.batches.retrieve(batchId);
    return statuses.includes(batch.status) ? batch : undefined;
  }, timeoutMs);
}

/** The UsageRecorded events of an account's batch lines: completion id -> events. */
export async function batchCharges(pool: Pool, accountId: string): Promise<Map<string, { costMicroChf: number; batchDiscountBps?: number }[]>> {
  const rows = await pool.query<{ stream_id: string; data: { costMicroChf: number; batchDiscountBps?: number; accountId: string } }>(
    "SELECT stream_id, data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1 AND data ? 'batchDiscountBps'",
    [accountId],
  );
  const charges = new Map<string, { costMicroChf: number; batchDiscountBps?: number }[]>();
  for (const row of rows.rows) charges.set(row.stream_id, [...(charges.get(row.stream_id) ?? []), row.data]);
  return charges;
}

export function expectEveryCustomIdOnce(lines: { custom_id: string }[], expected: string[]): void {
  expect(lines.map((l) => l.custom_id).sort()).toEqual([...expected].sort());
}
