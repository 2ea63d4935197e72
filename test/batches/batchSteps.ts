import { expect } from "vitest";
import type OpenAI from "openai";
import { toFile } from "openai";
import type { Pool } from "../../src/db/createPool.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
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

/** A batch of `count` lines that all send the same chat body (custom ids line-0, line-1, ...), created with the SDK. */
export async function createSameLinesBatch(
  openai: OpenAI,
  body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
  count: number,
): Promise<{ batchId: string; customIds: string[] }> {
  const lines = Array.from({ length: count }, (_, i) => ({ custom_id: `line-${i}`, method: "POST", url: "/v1/chat/completions", body: { ...body } }));
  const created = await openai.batches.create({
    input_file_id: await uploadBatchFile(openai, lines),
    endpoint: "/v1/chat/completions",
    completion_window: "24h",
  });
  return { batchId: created.id, customIds: lines.map((l) => l.custom_id) };
}

/**
 * Every line of a completed batch's output holds `reference`'s reply (the same request answered
 * interactively) and its usage, and is charged once, that usage at the model's batch price.
 */
export async function expectLinesLikeReference(
  openai: OpenAI,
  pool: Pool,
  done: { output_file_id?: string | null },
  expected: { accountId: string; customIds: string[]; reference: OpenAI.Chat.ChatCompletion; model: RegisteredModel },
): Promise<void> {
  const { reference, model } = expected;
  const output = await readJsonl(openai, done.output_file_id!);
  expectEveryCustomIdOnce(output, expected.customIds);
  const usage = { promptTokens: reference.usage!.prompt_tokens, completionTokens: reference.usage!.completion_tokens };
  const charges = await batchCharges(pool, expected.accountId);
  expect(charges.size).toBe(expected.customIds.length);
  for (const line of output) {
    expect(line.response.status_code).toBe(200);
    expect(line.response.body.choices[0].message.content).toBe(reference.choices[0]!.message.content);
    expect(line.response.body.usage).toMatchObject({ prompt_tokens: usage.promptTokens, completion_tokens: usage.completionTokens });
    const events = charges.get(`completion-${line.response.request_id}`)!;
    expect(events).toHaveLength(1);
    expect(events[0]!.costMicroChf).toBe(costMicroChf(usage, model, model.batchDiscountBps));
  }
}

/** Waits (at most 30 s) until `n` lines of the batch run (claimed by a dispatcher, their jobs started or queued). */
export async function waitForRunningLines(pool: Pool, batchId: string, n: number): Promise<void> {
  const running = async () =>
    (await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = 'running'", [batchId])).rows[0]!.n;
  await eventually(async () => ((await running()) === n ? true : undefined), 30_000);
}
