import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import type { FileStore } from "../../src/api/files/fileStore.ts";
import type { Engine } from "../../workers/engines/engine.ts";
import { withChat } from "../inference/withChat.ts";
import { TINY_CHAT, startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { type BatchLine, chatLine, readJsonl, uploadBatchFile, waitForStatus } from "./batchSteps.ts";

/** A prompt with this word gets a reply whose first delta holds U+0000 and an unpaired surrogate. */
const EMIT_UNSTORABLE = "emit-unstorable";

/** The tiny model, but its reply to EMIT_UNSTORABLE begins with what PostgreSQL's jsonb refuses. */
function unstorableReplyEngine(inner: Engine): Engine {
  return withChat(inner, (request, onDelta, signal, options) => {
    let first = JSON.stringify(request.messages).includes(EMIT_UNSTORABLE);
    const forward: typeof onDelta = (delta) => {
      if (first && delta.content !== undefined) {
        first = false;
        onDelta({ ...delta, content: `a\u0000b\ud800${delta.content}` });
        return;
      }
      onDelta(delta);
    };
    return inner.chat(request, forward, signal, options);
  });
}

/** The platform's file store, but reading one chosen file slowly (a long validation, made deterministic). */
function slowToRead(files: FileStore, slow: Set<string>): FileStore {
  return {
    create: (file) => files.create(file),
    get: (accountId, fileId) => files.get(accountId, fileId),
    list: (accountId, options) => files.list(accountId, options),
    delete: (accountId, fileId) => files.delete(accountId, fileId),
    async open(accountId, fileId) {
      const content = await files.open(accountId, fileId);
      if (!content || !slow.has(fileId)) return content;
      return (async function* () {
        for await (const chunk of content) {
          await new Promise((resolve) => setTimeout(resolve, 1500));
          yield chunk;
        }
      })();
    },
  };
}

function lineWith(i: number, body: Record<string, unknown>, fields: Partial<BatchLine> = {}): BatchLine {
  const line = chatLine(i, TINY_CHAT);
  return { ...line, ...fields, body: { ...line.body, ...body } };
}

/**
 * Text PostgreSQL cannot store (U+0000, unpaired surrogates, nesting past the request limits) in batch
 * input files, Responses requests and path ids: a 400 or a line error naming it, never a 500, never a
 * batch that blocks the others; the same characters in a model's output are stored with U+FFFD.
 */
describe("text PostgreSQL cannot store", () => {
  let platform: TestPlatform;
  let dispatcher: BatchDispatcher;
  const slowFiles = new Set<string>();

  beforeAll(async () => {
    platform = await startTestPlatform({ env: { BATCH_POLL_MS: "50" }, wrapEngine: (_model, engine) => unstorableReplyEngine(engine) });
    dispatcher = new BatchDispatcher(platform.deps, platform.inference, slowToRead(platform.deps.files!, slowFiles));
    dispatcher.start();
  }, 60_000);

  afterAll(async () => {
    await dispatcher?.stop();
    await platform?.close();
  });

  it("fails a batch whose lines hold U+0000, an unpaired surrogate or nesting past the limits, naming each line; another account's batch runs meanwhile", async () => {
    const owner = platform.openai((await platform.createKey()).key);
    const deep = `${"[".repeat(60_000)}${"]".repeat(60_000)}`;
    const poisoned = await uploadBatchFile(owner, [
      chatLine(1, TINY_CHAT),
      lineWith(2, { messages: [{ role: "user", content: "a\u0000b" }] }),
      lineWith(3, {}, { custom_id: "c\u0000" }),
      lineWith(4, { messages: [{ role: "user", content: "x\ud800" }] }),
      lineWith(5, {}, { url: "/v1/chat/completions\u0000" }),
      JSON.stringify(chatLine(6, TINY_CHAT)).replace(/}$/, `,"extra":${deep}}`),
      lineWith(7, { metadata: { "k\u0000": "v" } }),
    ]);
    const failing = await owner.batches.create({ input_file_id: poisoned, endpoint: "/v1/chat/completions", completion_window: "24h" });

    const other = platform.openai((await platform.createKey()).key);
    const fine = await other.batches.create({
      input_file_id: await uploadBatchFile(other, [chatLine(1, TINY_CHAT)]),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    expect((await waitForStatus(other, fine.id, ["completed", "failed"])).status).toBe("completed");

    const failed = await waitForStatus(owner, failing.id, ["failed", "completed", "in_progress"]);
    expect(failed.status).toBe("failed");
    expect(failed.errors?.data?.map((e) => [e.line, e.param])).toEqual([
      [2, "body.messages[0].content"],
      [3, "custom_id"],
      [4, "body.messages[0].content"],
      [5, "url"],
      [6, "extra[0][0][0][0][0][0][0][0][0][0][0]..."],
      [7, "body.metadata"],
    ]);
    expect(failed.errors?.data?.[0]?.message).toMatch(/^Line 2: 'body.messages\[0\].content' must not contain NUL/);
    expect(failed.errors?.data?.[4]?.message).toMatch(/nested more than 128 levels deep/);
    const kept = await platform.deps.pool.query("SELECT 1 FROM batch_lines WHERE batch_id = $1", [failing.id]);
    expect(kept.rowCount).toBe(0);
  }, 90_000);

  it("stores a model's U+0000 and unpaired surrogates as U+FFFD: the batch line is done, the stored response ended", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const created = await openai.batches.create({
      input_file_id: await uploadBatchFile(openai, [lineWith(1, { messages: [{ role: "user", content: EMIT_UNSTORABLE }] })]),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    const done = await waitForStatus(openai, created.id, ["completed", "failed", "expired"]);
    expect(done.status).toBe("completed");
    const [output] = await readJsonl(openai, done.output_file_id!);
    expect(output.response.body.choices[0].message.content).toMatch(/^a\uFFFDb\uFFFD/);

    const response = await openai.responses.create({ model: TINY_CHAT, input: EMIT_UNSTORABLE, max_output_tokens: 4 });
    expect(response.output_text.startsWith("a\u0000b\ud800")).toBe(true);
    const stored = await openai.responses.retrieve(response.id);
    expect(stored.status).toBe(response.status);
    expect(["completed", "incomplete"]).toContain(stored.status);
    expect(stored.output_text).toMatch(/^a\uFFFDb\uFFFD/);
  }, 90_000);

  it("answers a stored Responses request holding U+0000 or an unpaired surrogate with a 400 naming the place; store: false runs it", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const refusals: [Record<string, unknown>, string][] = [
      [{ input: "a\u0000b" }, "input"],
      [{ input: [{ role: "user", content: [{ type: "input_text", text: "x\ud800" }] }] }, "input[0].content[0].text"],
      [{ input: "Hi", instructions: "be \u0000" }, "instructions"],
      [{ input: "Hi", metadata: { k: "v\u0000" } }, "metadata.k"],
    ];
    for (const [body, param] of refusals) {
      await expect(openai.responses.create({ model: TINY_CHAT, max_output_tokens: 4, ...body } as never)).rejects.toMatchObject({
        status: 400,
        error: { param },
      });
    }
    const unstored = await openai.responses.create({ model: TINY_CHAT, input: "a\u0000b", store: false, max_output_tokens: 4 });
    expect(["completed", "incomplete"]).toContain(unstored.status);
    // Ids no response can have: not found, as any unknown id.
    await expect(openai.responses.create({ model: TINY_CHAT, input: "Hi", previous_response_id: "resp_\u0000", store: false })).rejects.toMatchObject({
      status: 400,
      error: { param: "previous_response_id" },
    });
    await expect(
      openai.responses.create({ model: TINY_CHAT, input: [{ type: "item_reference", id: "msg_\u0000" }], store: false } as never),
    ).rejects.toMatchObject({ status: 400, error: { param: "input[0].id" } });
    for (const [method, path] of [
      ["GET", "/v1/responses/resp_%00"],
      ["DELETE", "/v1/responses/resp_%00"],
      ["POST", "/v1/responses/resp_%00/cancel"],
      ["GET", "/v1/responses/resp_%00/input_items"],
      ["GET", "/v1/batches/batch_%00"],
      ["POST", "/v1/batches/batch_%00/cancel"],
    ] as const) {
      const answer = await fetch(`${platform.baseUrl}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
      expect([path, answer.status]).toEqual([path, 404]);
    }
    const list = await fetch(`${platform.baseUrl}/v1/batches?after=batch_%00`, { headers: { authorization: `Bearer ${key}` } });
    expect(list.status).toBe(400);
    const file = await uploadBatchFile(openai, [chatLine(1, TINY_CHAT)]);
    await expect(
      openai.batches.create({ input_file_id: file, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { k: "\u0000" } }),
    ).rejects.toMatchObject({ status: 400, error: { param: "metadata.k" } });
  }, 60_000);

  it("refuses an uploaded file's name with U+0000 (400 invalid_multipart), and cuts a long name at 512 characters without splitting a pair", async () => {
    const { key } = await platform.createKey();
    const upload = async (filename: string) => {
      const boundary = "b0undary";
      const body = Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n`),
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/jsonl\r\n\r\n`),
        Buffer.from(`${JSON.stringify(chatLine(1, TINY_CHAT))}\n\r\n--${boundary}--\r\n`),
      ]);
      const answer = await fetch(`${platform.baseUrl}/v1/files`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": `multipart/form-data; boundary=${boundary}` },
        body,
      });
      return { status: answer.status, body: (await answer.json()) as { filename?: string; error?: { code: string } } };
    };
    expect(await upload("a\u0000b.jsonl")).toEqual({ status: 400, body: { error: expect.objectContaining({ code: "invalid_multipart" }) } });
    const long = await upload(`${"x".repeat(511)}😀😀`);
    expect(long.status).toBe(200);
    expect(long.body.filename).toBe(`${"x".repeat(511)}😀`);
  });

  it("cancels a batch while its file is being validated: cancelling at once, then cancelled with nothing run or kept", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const file = await uploadBatchFile(openai, [chatLine(1, TINY_CHAT), chatLine(2, TINY_CHAT)]);
    slowFiles.add(file);
    const created = await openai.batches.create({ input_file_id: file, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const cancelling = await openai.batches.cancel(created.id, { maxRetries: 0 });
    expect(cancelling.status).toBe("cancelling");
    const cancelled = await waitForStatus(openai, created.id, ["cancelled", "completed", "failed"]);
    expect(cancelled.status).toBe("cancelled");
    expect(cancelled.request_counts).toEqual({ total: 0, completed: 0, failed: 0 });
    const kept = await platform.deps.pool.query("SELECT 1 FROM batch_lines WHERE batch_id = $1", [created.id]);
    expect(kept.rowCount).toBe(0);
  }, 60_000);
});
