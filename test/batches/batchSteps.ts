import { expect } from "vitest";
import type OpenAI from "openai";
import { toFile } from "openai";
import type { Pool } from "../../src/db/createPool.ts";
import { eventually } from "../support/eventually.ts";
import { assertOpenAiShape } from "../support/openaiSchemas/openaiSchemas.ts";

export type BatchLine = { custom_id: string; method: string; url: string; body: Record<string, unknown> };

export function chatLine(i: number, model: string, maxTokens = 4): BatchLine {
  return {
    custom_id: `req-${i}`,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model, messages: [{ role: "user", content: `Say ${i}` }], max_tokens: maxTokens },
  };
}

/** An input file of `lines` (raw strings taken as they are), uploaded with the SDK's files.create (purpose batch). */
export async function uploadBatchFile(openai: OpenAI, lines: (BatchLine | string)[]): Promise<string> {
  const text = lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n");
  const file = await openai.files.create({ file: await toFile(Buffer.from(text), "in.jsonl"), purpose: "batch" });
  assertOpenAiShape("file", file);
  return file.id;
}

/** A JSONL file's lines, read with the SDK's files.content. */
export async function readJsonl(openai: OpenAI, fileId: string): Promise<any[]> {
  const response = await openai.files.content(fileId);
  return (await response.text())
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
