import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { eventually } from "../support/eventually.ts";
import { assertOpenAiShape } from "../support/openaiSchemas/openaiSchemas.ts";
import { setTestSubscription } from "../support/testAccounts.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { batchCharges, chatLine, expectEveryCustomIdOnce, readJsonl, uploadBatchFile, waitForStatus } from "./batchSteps.ts";

/**
 * The Batch API end to end with the official openai SDK (base URL and key only): the real app, a worker
 * with the tiny model, the dispatcher of this API process. Files go in and out through the SDK's
 * files.create / files.content; every batch and file body is checked against OpenAI's schemas.
 */
describe("the Batch API", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({ env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4" } });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("runs every line of a 200-line file once into the output file, a line with an unknown model into the error file, each charged once at the batch price", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: 199 }, (_, i) => chatLine(i, TINY_CHAT));
    const unknown = { ...chatLine(999, "no-such-model"), custom_id: "unknown-model" };
    const inputFileId = await uploadBatchFile(openai, [...lines, unknown]);

    const created = await openai.batches.create({
      input_file_id: inputFileId,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { run: "1" },
    });
    assertOpenAiShape("batch", created);
    expect(created.status).toBe("validating");
    expect(created.metadata).toEqual({ run: "1" });

    const done = await waitForStatus(openai, created.id, ["completed", "failed"]);
    assertOpenAiShape("batch", done);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 200, completed: 199, failed: 1 });
    // Its lines name two models (one unknown): no one `model` for the batch.
    expect(done).not.toHaveProperty("model");
    expect(done.completed_at).toBeGreaterThan(0);
    expect(done.usage?.input_tokens).toBeGreaterThan(0);

    const output = await readJsonl(openai, done.output_file_id!);
    expectEveryCustomIdOnce(
      output,
      lines.map((l) => l.custom_id),
    );
    for (const line of output) {
      expect(line.response.status_code).toBe(200);
      expect(line.error).toBeNull();
      assertOpenAiShape("chat.completion", line.response.body);
      expect(line.response.request_id).toBe(line.response.body.id);
    }
    const errors = await readJsonl(openai, done.error_file_id!);
    expect(errors).toHaveLength(1);
    expect(errors[0].custom_id).toBe("unknown-model");
    expect(errors[0].response.status_code).toBe(400);
    expect(errors[0].response.body.error.code).toBe("model_not_found");

    // One charge per completed line, at the batch discount of the price table (half price by default).
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    expect(charges.size).toBe(199);
    for (const line of output) {
      const [charge, ...more] = charges.get(`completion-${line.response.request_id}`)!;
      expect(more).toHaveLength(0);
      expect(charge!.batchDiscountBps).toBe(5000);
      const usage = line.response.body.usage;
      const model = platform.inference.registry.get(TINY_CHAT)!;
      expect(charge!.costMicroChf).toBe(costMicroChf({ promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }, model, 5000));
    }
    const lifecycle = await platform.deps.pool.query<{ event_type: string; data: any }>(
      "SELECT event_type, data FROM es_events WHERE stream_id = $1 ORDER BY stream_version",
      [`batch-${created.id}`],
    );
    expect(lifecycle.rows.map((r) => r.event_type)).toEqual(["BatchCreated", "BatchCompleted"]);
    expect(lifecycle.rows[1]!.data.counts).toEqual({ total: 200, completed: 199, failed: 1 });

    // The output and error files are the account's files (purpose batch_output), listed with the input.
    for (const id of [done.output_file_id!, done.error_file_id!]) {
      const file = await openai.files.retrieve(id);
      assertOpenAiShape("file", file);
      expect(file.purpose).toBe("batch_output");
    }
    assertOpenAiShape("file.list", await (await openai.files.list().asResponse()).json());
    const listed = await openai.files.list();
    expect(listed.data.map((f) => f.id).sort()).toEqual([inputFileId, done.output_file_id!, done.error_file_id!].sort());
    const batches = await openai.batches.list();
    expect(batches.data.map((b) => b.id)).toEqual([created.id]);
    for (const batch of batches.data) assertOpenAiShape("batch", batch);
    // Another account's key sees neither the files nor their content.
    const other = platform.openai((await platform.createKey()).key);
    await expect(other.files.retrieve(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
    expect((await other.files.list()).data).toEqual([]);
  }, 120_000);

  it("runs /v1/responses lines: each output body is a completed Response object, charged once at the batch price", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: 6 }, (_, i) => ({
      custom_id: `resp-${i}`,
      method: "POST",
      url: "/v1/responses",
      body: { model: TINY_CHAT, input: `Say ${i}`, instructions: "Be brief.", max_output_tokens: 8, metadata: { line: String(i) } },
    }));
    const inputFileId = await uploadBatchFile(openai, lines);
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/responses", completion_window: "24h" });
    const done = await waitForStatus(openai, created.id, ["completed", "failed"]);
    assertOpenAiShape("batch", done);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 6, completed: 6, failed: 0 });
    // Every line names one model: the batch's `model`, on retrieve and in the list.
    expect(created).not.toHaveProperty("model");
    expect(done.model).toBe(TINY_CHAT);
    expect((await openai.batches.list()).data.find((b) => b.id === created.id)?.model).toBe(TINY_CHAT);
    const output = await readJsonl(openai, done.output_file_id!);
    expectEveryCustomIdOnce(
      output,
      lines.map((l) => l.custom_id),
    );
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    for (const line of output) {
      expect(line.response.status_code).toBe(200);
      const body = line.response.body;
      assertOpenAiShape("response", body);
      expect(body.object).toBe("response");
      // OpenAI's form of a response id (`resp_`, as chat's are `chatcmpl-`).
      expect(body.id).toMatch(/^resp_[A-Za-z0-9]+$/);
      expect(["completed", "incomplete"]).toContain(body.status);
      expect(body.instructions).toBe("Be brief.");
      expect(body.metadata).toEqual({ line: line.custom_id.slice("resp-".length) });
      expect(body.output.some((item: { type: string }) => item.type === "message")).toBe(true);
      expect(body.usage.output_tokens).toBeGreaterThan(0);
      expect(line.response.request_id).toBe(body.id);
      const events = charges.get(`completion-${body.id}`)!;
      expect(events).toHaveLength(1);
      expect(events[0]!.batchDiscountBps).toBe(5000);
    }
    expect(charges.size).toBe(6);

    // A streamed line is refused before anything runs.
    const streamed = await uploadBatchFile(openai, [{ ...lines[0]!, body: { ...lines[0]!.body, stream: true } }]);
    const refused = await openai.batches.create({ input_file_id: streamed, endpoint: "/v1/responses", completion_window: "24h" });
    const failed = await waitForStatus(openai, refused.id, ["failed", "completed"]);
    expect(failed.errors?.data?.map((e) => [e.line, e.param])).toEqual([[1, "body.stream"]]);
  }, 120_000);

  it("fails a file with bad lines before anything runs, naming the lines, and charges nothing", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const inputFileId = await uploadBatchFile(openai, [
      chatLine(1, TINY_CHAT),
      "{not json",
      { ...chatLine(3, TINY_CHAT), url: "/v1/embeddings" },
      { ...chatLine(4, TINY_CHAT), body: { messages: [] } },
      { ...chatLine(1, TINY_CHAT) },
    ]);
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const failed = await waitForStatus(openai, created.id, ["failed", "completed", "in_progress"]);
    assertOpenAiShape("batch", failed);
    expect(failed.status).toBe("failed");
    expect(failed.errors?.data?.map((e) => [e.line, e.code])).toEqual([
      [2, "invalid_json_line"],
      [3, "mismatched_url"],
      [4, expect.any(String)],
      [5, "duplicate_custom_id"],
    ]);
    expect((await batchCharges(platform.deps.pool, account.accountId)).size).toBe(0);
    const kept = await platform.deps.pool.query("SELECT 1 FROM batch_lines WHERE batch_id = $1", [created.id]);
    expect(kept.rowCount).toBe(0);
  }, 60_000);

  it("fails a line that is not UTF-8 (never altered into U+FFFD), naming it; a byte order mark opening the file is taken", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const text = (line: unknown) => Buffer.from(`${JSON.stringify(line)}\n`);
    const bytes = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      text(chatLine(1, TINY_CHAT)),
      Buffer.from('{"custom_id":"id-\xff","method":"POST"}\n', "latin1"),
      text(chatLine(3, TINY_CHAT)),
    ]);
    const file = await openai.files.create({ file: await toFile(bytes, "in.jsonl"), purpose: "batch" });
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const failed = await waitForStatus(openai, created.id, ["failed", "completed", "in_progress"]);
    expect(failed.errors?.data?.map((e) => [e.line, e.code, e.message])).toEqual([[2, "invalid_json_line", "Line 2 is not valid UTF-8 text."]]);
  }, 60_000);

  it("fails /v1/responses lines that need what a batch line does not have: background, previous_response_id, an item reference", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const line = (i: number, body: Record<string, unknown>) => ({
      custom_id: `r${i}`,
      method: "POST",
      url: "/v1/responses",
      body: { model: TINY_CHAT, input: "Hi", ...body },
    });
    const inputFileId = await uploadBatchFile(openai, [
      line(1, {}),
      line(2, { background: true }),
      line(3, { previous_response_id: "resp_0123" }),
      line(4, {
        input: [
          { role: "user", content: "Hi" },
          { type: "item_reference", id: "msg_0123" },
        ],
      }),
    ]);
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/responses", completion_window: "24h" });
    const failed = await waitForStatus(openai, created.id, ["failed", "completed", "in_progress"]);
    expect(failed.status).toBe("failed");
    expect(failed.errors?.data?.map((e) => [e.line, e.param])).toEqual([
      [2, "body.background"],
      [3, "body.previous_response_id"],
      [4, "body.input"],
    ]);
  }, 60_000);

  it("cancels a batch: cancelling, then cancelled with fewer lines done; the lines not run are in the error file", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: 80 }, (_, i) => chatLine(i, TINY_CHAT, 16));
    const inputFileId = await uploadBatchFile(openai, lines);
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitForStatus(openai, created.id, ["in_progress"]);
    // Two cancels at once (a client's retry): both answer the cancelling batch.
    const [cancelling, again] = await Promise.all([openai.batches.cancel(created.id, { maxRetries: 0 }), openai.batches.cancel(created.id, { maxRetries: 0 })]);
    expect(cancelling.status).toBe("cancelling");
    expect(again.status).toBe("cancelling");
    expect(cancelling.cancelling_at).toBeGreaterThan(0);
    const cancelled = await waitForStatus(openai, created.id, ["cancelled"]);
    assertOpenAiShape("batch", cancelled);
    expect(cancelled.request_counts!.completed).toBeLessThan(80);
    expect(cancelled.request_counts!.completed + cancelled.request_counts!.failed).toBe(80);
    const errors = await readJsonl(openai, cancelled.error_file_id!);
    expect(errors.length).toBe(cancelled.request_counts!.failed);
    expect(errors.some((e) => e.error?.code === "batch_cancelled")).toBe(true);
    // Charged: only the lines that ran (at most one charge each).
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    for (const events of charges.values()) expect(events).toHaveLength(1);
    expect(charges.size).toBeLessThan(80);
    // The lines its cancel stopped while they ran are charged nothing (their partial replies reach nobody):
    // they end as batch_cancelled, like those never run, and every token charged is in the output file.
    expect(errors.map((e) => [e.response, e.error?.code])).toEqual(errors.map(() => [null, "batch_cancelled"]));
    const charged = await platform.deps.pool.query<{ prompt: number; completion: number }>(
      `SELECT coalesce(sum((data->>'promptTokens')::int), 0)::int AS prompt, coalesce(sum((data->>'completionTokens')::int), 0)::int AS completion
       FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1`,
      [account.accountId],
    );
    const outputs = cancelled.output_file_id ? await readJsonl(openai, cancelled.output_file_id) : [];
    const delivered = outputs.reduce(
      (sum, o) => ({ prompt: sum.prompt + o.response.body.usage.prompt_tokens, completion: sum.completion + o.response.body.usage.completion_tokens }),
      { prompt: 0, completion: 0 },
    );
    expect(charged.rows[0]).toEqual(delivered);
    expect(cancelled.usage).toMatchObject({ input_tokens: delivered.prompt, output_tokens: delivered.completion });
  }, 120_000);

  it("without an active subscription: nothing new is made (402), but the account's batches and files are read and its batch cancelled", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const inputFileId = await uploadBatchFile(
      openai,
      Array.from({ length: 40 }, (_, i) => chatLine(i, TINY_CHAT, 16)),
    );
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await setTestSubscription(platform.deps.pool, account.accountId, "inactive");
    await platform.deps.keyAuth.invalidateAccount(account.accountId);
    await expect(openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" })).rejects.toMatchObject({
      status: 402,
    });
    await expect(openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 })).rejects.toMatchObject({
      status: 402,
    });
    await expect(openai.models.list()).rejects.toMatchObject({ status: 402 });
    expect((await openai.batches.retrieve(created.id)).id).toBe(created.id);
    expect((await openai.files.list()).data.map((f) => f.id)).toContain(inputFileId);
    expect(await (await openai.files.content(inputFileId)).text()).toContain('"custom_id"');
    const cancelling = await openai.batches.cancel(created.id);
    expect(["cancelling", "cancelled"]).toContain(cancelling.status);
    expect((await waitForStatus(openai, created.id, ["cancelled"])).status).toBe("cancelled");
  }, 120_000);

  it("honours output_expires_after: the output file expires that many seconds after its creation; a bad value is a 400 naming it; a completed batch cannot be cancelled (final, not retried)", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const inputFileId = await uploadBatchFile(openai, [chatLine(1, TINY_CHAT)]);
    const create = (output_expires_after: unknown) =>
      openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h", output_expires_after } as never);
    for (const [value, param] of [
      [{ anchor: "created_at", seconds: 60 }, "output_expires_after.seconds"],
      [{ anchor: "created_at", seconds: 2_592_001 }, "output_expires_after.seconds"],
      [{ anchor: "last_active_at", seconds: 3600 }, "output_expires_after.anchor"],
      [{ anchor: "created_at", seconds: 3600, days: 1 }, "output_expires_after.days"],
    ] as const) {
      await expect(create(value)).rejects.toMatchObject({ status: 400, error: { param } });
    }
    const created = await create({ anchor: "created_at", seconds: 3600 });
    const done = await waitForStatus(openai, created.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const output = await openai.files.retrieve(done.output_file_id!);
    expect(output.expires_at).toBe(output.created_at + 3600);
    // Cancelling a completed batch is final: 409 with x-should-retry: false, which the SDK obeys with retries on.
    let requests = 0;
    const retrying = new OpenAI({
      baseURL: `${platform.baseUrl}/v1`,
      apiKey: key,
      maxRetries: 2,
      fetch: (url, init) => {
        requests++;
        return fetch(url, init);
      },
    });
    const refused = await retrying.batches.cancel(done.id).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(OpenAI.ConflictError);
    expect((refused as InstanceType<typeof OpenAI.ConflictError>).headers.get("x-should-retry")).toBe("false");
    expect((refused as InstanceType<typeof OpenAI.ConflictError>).code).toBe("batch_not_cancellable");
    expect(requests).toBe(1);
    // Without it, the platform's retention (30 days here).
    const plain = await waitForStatus(openai, (await create(null)).id, ["completed", "failed"]);
    const kept = await openai.files.retrieve(plain.output_file_id!);
    expect(kept.expires_at).toBe(kept.created_at + 30 * 86_400);
  }, 60_000);

  it("lists the account's batches newest first with a cursor; another account's key gets 404", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const ids: string[] = [];
    const inputFileIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const inputFileId = await uploadBatchFile(openai, [chatLine(i, TINY_CHAT)]);
      inputFileIds.push(inputFileId);
      ids.push((await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" })).id);
    }
    const first = await openai.batches.list({ limit: 2 });
    expect(first.data.map((b) => b.id)).toEqual([ids[2], ids[1]]);
    expect(first.hasNextPage()).toBe(true);
    const all: string[] = [];
    for await (const batch of openai.batches.list({ limit: 2 })) all.push(batch.id);
    expect(all).toEqual([...ids].reverse());

    const other = platform.openai((await platform.createKey()).key);
    await expect(other.batches.retrieve(ids[0]!)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.cancel(ids[0]!)).rejects.toMatchObject({ status: 404 });
    expect((await other.batches.list()).data).toEqual([]);
    // Another account's file cannot be a batch's input either: 404 file_not_found, as on the Files routes (an unknown id alike).
    for (const inputFileId of [inputFileIds[0]!, "file-x"]) {
      await expect(other.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" })).rejects.toMatchObject({
        status: 404,
        code: "file_not_found",
        param: "input_file_id",
      });
    }
    for (const id of ids) await waitForStatus(openai, id, ["completed"]);
  }, 120_000);

  it("survives an API restart mid-batch: every line done once and charged once, the charges equal to the completed lines", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: 40 }, (_, i) => chatLine(i, TINY_CHAT, 16));
    const inputFileId = await uploadBatchFile(openai, lines);
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await eventually(async () => {
      const batch = await openai.batches.retrieve(created.id);
      return batch.request_counts!.completed >= 5 ? batch : undefined;
    }, 60_000);
    // The API process's dispatcher stops with lines in flight (their jobs go on); a new one takes over.
    await batches.stopDispatcher();
    const midway = await openai.batches.retrieve(created.id);
    expect(midway.request_counts!.completed).toBeLessThan(40);
    batches.restartDispatcher();
    const done = await waitForStatus(openai, created.id, ["completed"], 90_000);
    expect(done.request_counts).toEqual({ total: 40, completed: 40, failed: 0 });
    const output = await readJsonl(openai, done.output_file_id!);
    expectEveryCustomIdOnce(
      output,
      lines.map((l) => l.custom_id),
    );
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    expect(charges.size).toBe(40);
    for (const events of charges.values()) expect(events).toHaveLength(1);
  }, 180_000);
});
