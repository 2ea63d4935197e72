import { randomBytes } from "node:crypto";
import { type IncomingMessage, request as httpRequest } from "node:http";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { assertOpenAiError, assertOpenAiShape } from "../support/openaiSchemas/openaiSchemas.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

let app: TestApp;
/** The same database and Redis with small limits: FILES_MAX_BYTES 100000, FILES_MAX_LINES 10. */
let limited: TestApp;

async function createKey(on: TestApp): Promise<{ accountId: string; key: string }> {
  const account = await createTestAccount(on.deps.pool);
  const created = await on.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: "files" } });
  if (created.status !== 201) throw new Error(`key creation failed: ${created.status} ${created.text}`);
  return { accountId: account.accountId, key: created.body.key as string };
}

function client(on: TestApp, key: string): OpenAI {
  return new OpenAI({ baseURL: `${on.baseUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });
}

function jsonl(lines: number): Buffer {
  const rows = Array.from({ length: lines }, (_, i) =>
    JSON.stringify({
      custom_id: `req-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "m", messages: [{ role: "user", content: `hi ${i}` }] },
    }),
  );
  return Buffer.from(`${rows.join("\n")}\n`);
}

/** Files stored (not counting deleted files' tombstones, which hold no content) and content chunks. */
async function fileRows(): Promise<{ files: number; chunks: number }> {
  const { rows } = await app.deps.pool.query<{ files: string; chunks: string }>(
    "SELECT (SELECT count(*) FROM files WHERE status <> 'deleted') AS files, (SELECT count(*) FROM file_chunks) AS chunks",
  );
  return { files: Number(rows[0]?.files), chunks: Number(rows[0]?.chunks) };
}

async function expectApiError(promise: Promise<unknown>, status: number, param?: string): Promise<void> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OpenAI.APIError);
  const apiError = error as InstanceType<typeof OpenAI.APIError>;
  expect(apiError.status).toBe(status);
  assertOpenAiError(status, { error: apiError.error });
  if (param !== undefined) expect((apiError.error as { param?: string }).param).toBe(param);
}

beforeAll(async () => {
  app = await startTestApp();
  limited = await startTestApp({ shareWith: app, env: { FILES_MAX_BYTES: "100000", FILES_MAX_LINES: "10" } });
}, 60_000);

afterAll(async () => {
  await limited?.close();
  await app?.close();
});

describe("Files API with the official openai SDK", () => {
  it("creates, retrieves, lists, downloads and deletes a 200-line JSONL file; another account sees none of it", async () => {
    const owner = await createKey(app);
    const other = await createKey(app);
    const openai = client(app, owner.key);
    const content = jsonl(200);

    const created = await openai.files.create({ file: await toFile(content, "input.jsonl"), purpose: "batch" });
    assertOpenAiShape("file", created);
    expect(created).toMatchObject({ object: "file", bytes: content.length, filename: "input.jsonl", purpose: "batch", status: "processed" });
    expect(created.id).toMatch(/^file-[A-Za-z0-9]+$/);
    // FILES_RETENTION_DAYS default 30.
    expect(created.expires_at).toBe(created.created_at + 30 * 86400);
    const { rows } = await app.deps.pool.query("SELECT lines FROM files WHERE id = $1", [created.id]);
    expect(Number(rows[0]?.lines)).toBe(200);

    const retrieved = await openai.files.retrieve(created.id);
    assertOpenAiShape("file", retrieved);
    expect(retrieved).toEqual(created);

    const download = await openai.files.content(created.id);
    expect(download.headers.get("content-length")).toBe(String(content.length));
    expect(Buffer.compare(Buffer.from(await download.arrayBuffer()), content)).toBe(0);

    // Another account's key: 404 for each operation, and its list is empty.
    const stranger = client(app, other.key);
    await expectApiError(stranger.files.retrieve(created.id), 404);
    await expectApiError(stranger.files.content(created.id), 404);
    await expectApiError(stranger.files.delete(created.id), 404);
    expect((await stranger.files.list()).data).toEqual([]);

    const deleted = await openai.files.delete(created.id);
    assertOpenAiShape("file.deleted", deleted);
    expect(deleted).toEqual({ id: created.id, object: "file", deleted: true });
    await expectApiError(openai.files.retrieve(created.id), 404);
    await expectApiError(openai.files.content(created.id), 404);
    await expectApiError(openai.files.delete(created.id), 404);
    const left = await app.deps.pool.query("SELECT count(*)::int AS n FROM file_chunks WHERE file_id = $1", [created.id]);
    expect(left.rows[0]?.n).toBe(0);
  });

  it("lists an account's files newest first, page by page with `after`, in either order and by purpose", async () => {
    const owner = await createKey(app);
    const openai = client(app, owner.key);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await openai.files.create({ file: await toFile(jsonl(1), `f${i}.jsonl`), purpose: "batch" })).id);

    const firstPage = await app.request("GET", "/v1/files?limit=2", { token: owner.key });
    expect(firstPage.status).toBe(200);
    assertOpenAiShape("file.list", firstPage.body);
    expect(firstPage.body.data.map((f: { id: string }) => f.id)).toEqual([ids[4], ids[3]]);
    expect(firstPage.body).toMatchObject({ object: "list", has_more: true, first_id: ids[4], last_id: ids[3] });

    const seen: string[] = [];
    for await (const file of openai.files.list({ limit: 2 })) seen.push(file.id);
    expect(seen).toEqual([...ids].reverse());
    const ascending: string[] = [];
    for await (const file of openai.files.list({ limit: 2, order: "asc" })) ascending.push(file.id);
    expect(ascending).toEqual(ids);

    expect((await openai.files.list({ purpose: "batch_output" })).data).toEqual([]);
    // Another purpose of OpenAI's (a string there): no file of it here, an empty page rather than a 400.
    const otherPurpose = await openai.files.list({ purpose: "assistants" });
    expect(otherPurpose.data).toEqual([]);
    expect(otherPurpose.has_more).toBe(false);
    expect((await openai.files.list({ purpose: "batch" })).data.map((f) => f.id)).toEqual([...ids].reverse());
    const bad = await app.request("GET", "/v1/files?limit=0", { token: owner.key });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe("limit");
    // As /v1/batches answers: an empty cursor and an unknown parameter are 400s naming them.
    const empty = await app.request("GET", "/v1/files?after=", { token: owner.key });
    expect([empty.status, empty.body.error.param]).toEqual([400, "after"]);
    const unknown = await app.request("GET", "/v1/files?foo=bar", { token: owner.key });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body.error)).toContain("foo");
  });

  it("deletes every file in the SDK's auto-pagination cleanup loop; a deleted file stays a cursor, in both orders, for its account only", async () => {
    const owner = await createKey(app);
    const other = await createKey(app);
    const openai = client(app, owner.key);
    const stranger = client(app, other.key);
    const upload = async (n: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) ids.push((await openai.files.create({ file: await toFile(jsonl(1), `c${i}.jsonl`), purpose: "batch" })).id);
      return ids;
    };

    // The SDK fetches the next page after the caller consumed this one, with the last (now deleted) id as `after`.
    const doomed = await upload(5);
    const deleted: string[] = [];
    for await (const file of openai.files.list({ limit: 2 })) {
      await openai.files.delete(file.id);
      deleted.push(file.id);
    }
    expect(deleted).toEqual([...doomed].reverse());
    expect((await openai.files.list()).data).toEqual([]);
    const ascendingDoomed = await upload(5);
    for await (const file of openai.files.list({ limit: 2, order: "asc" })) await openai.files.delete(file.id);
    expect((await openai.files.list()).data).toEqual([]);
    // Nothing of the deleted files' content or name stays.
    const { rows: tombstones } = await app.deps.pool.query<{ filename: string; chunks: number }>(
      "SELECT filename, (SELECT count(*)::int FROM file_chunks WHERE file_id = files.id) AS chunks FROM files WHERE id = ANY($1)",
      [[...doomed, ...ascendingDoomed]],
    );
    for (const row of tombstones) expect(row).toEqual({ filename: "", chunks: 0 });

    const ids = await upload(5);
    await openai.files.delete(ids[2] as string);
    const desc = await openai.files.list({ after: ids[2] as string, limit: 10 });
    expect(desc.data.map((f) => f.id)).toEqual([ids[1], ids[0]]);
    expect(desc.has_more).toBe(false);
    const asc = await openai.files.list({ after: ids[2] as string, limit: 1, order: "asc" });
    expect(asc.data.map((f) => f.id)).toEqual([ids[3]]);
    expect(asc.has_more).toBe(true);
    const raw = await app.request("GET", `/v1/files?after=${ids[2]}&order=asc`, { token: owner.key });
    assertOpenAiShape("file.list", raw.body);
    expect(raw.body).toMatchObject({ first_id: ids[3], last_id: ids[4], has_more: false });

    // The deleted file is gone for every other read, and deleting it again is a 404.
    await expectApiError(openai.files.retrieve(ids[2] as string), 404);
    await expectApiError(openai.files.content(ids[2] as string), 404);
    await expectApiError(openai.files.delete(ids[2] as string), 404);
    // Another account learns nothing from the id, deleted or not: 404, and an empty page as a cursor.
    for (const id of [ids[2] as string, ids[3] as string]) {
      await expectApiError(stranger.files.retrieve(id), 404);
      await expectApiError(stranger.files.delete(id), 404);
      for (const order of ["asc", "desc"] as const) {
        const page = await stranger.files.list({ after: id, order });
        expect(page.data).toEqual([]);
        expect(page.has_more).toBe(false);
      }
    }
    await stranger.files.create({ file: await toFile(jsonl(1), "s.jsonl"), purpose: "batch" });
    for (const order of ["asc", "desc"] as const) expect((await stranger.files.list({ after: ids[2] as string, order })).data).toEqual([]);
  });

  it("writes nothing to stderr outside the JSON log when a client stops reading a download (koa printed ECONNRESET stacks)", async () => {
    const owner = await createKey(app);
    const created = await client(app, owner.key).files.create({ file: await toFile(jsonl(40_000), "big.jsonl"), purpose: "batch" });
    const printed = vi.spyOn(console, "error");
    try {
      for (let i = 0; i < 3; i++) {
        await new Promise<void>((resolve, reject) => {
          const req = httpRequest(`${app.baseUrl}/v1/files/${created.id}/content`, { headers: { authorization: `Bearer ${owner.key}` } }, (res) => {
            res.once("data", () => {
              req.destroy();
              resolve();
            });
          });
          req.on("error", () => undefined);
          req.on("close", () => resolve());
          setTimeout(() => reject(new Error("no answer")), 10_000).unref();
          req.end();
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(printed).not.toHaveBeenCalled();
    } finally {
      printed.mockRestore();
    }
  });

  it("round-trips any bytes exactly: NUL bytes, invalid UTF-8, CRLF, no final newline, across chunk boundaries", async () => {
    const owner = await createKey(app);
    const openai = client(app, owner.key);
    const content = Buffer.concat([
      Buffer.from([0x00, 0xff, 0xfe, 0xc3, 0x28, 0x0d, 0x0a, 0x00]),
      randomBytes(2.5 * 1024 * 1024),
      Buffer.from("\r\n--x\r\nend"),
    ]);
    const created = await openai.files.create({ file: await toFile(content, "binary.bin"), purpose: "batch" });
    expect(created.bytes).toBe(content.length);
    const download = await openai.files.content(created.id);
    expect(download.headers.get("content-type")).toBe("application/octet-stream");
    expect(Buffer.compare(Buffer.from(await download.arrayBuffer()), content)).toBe(0);
  });

  it("refuses a wrong or missing purpose (400 naming `purpose`), also when it comes after the file, and stores nothing", async () => {
    const owner = await createKey(app);
    const openai = client(app, owner.key);
    const before = await fileRows();
    await expectApiError(openai.files.create({ file: await toFile(jsonl(3), "a.jsonl"), purpose: "fine-tune" }), 400, "purpose");
    // purpose before the file: refused before the file is stored
    const form = new FormData();
    form.append("purpose", "assistants");
    form.append("file", new File([jsonl(3)], "a.jsonl"));
    const asked = performance.now();
    const early = await fetch(`${app.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${owner.key}` }, body: form });
    expect(early.status).toBe(400);
    // Answered as soon as the whole (small) form was received: the rest of it is drained at once, not
    // after the drain's 2 s limit.
    expect(performance.now() - asked).toBeLessThan(1_000);
    expect(((await early.json()) as { error: { param: string } }).error.param).toBe("purpose");
    const missing = new FormData();
    missing.append("file", new File([jsonl(3)], "a.jsonl"));
    const noPurpose = await fetch(`${app.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${owner.key}` }, body: missing });
    expect(noPurpose.status).toBe(400);
    expect(((await noPurpose.json()) as { error: { param: string } }).error.param).toBe("purpose");
    const json = await app.request("POST", "/v1/files", { token: owner.key, body: { purpose: "batch" } });
    expect(json.status).toBe(400);
    assertOpenAiError(400, json.body);
    // The content as a plain field (curl -F 'file=<a.jsonl'), no filename: said as such.
    const plain = new FormData();
    plain.append("purpose", "batch");
    plain.append("file", jsonl(3).toString());
    const noFile = await fetch(`${app.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${owner.key}` }, body: plain });
    expect(noFile.status).toBe(400);
    expect(((await noFile.json()) as { error: { param: string; message: string } }).error).toMatchObject({
      param: "file",
      message: expect.stringContaining("no file"),
    });
    expect(await fileRows()).toEqual(before);
  });

  it("honours `expires_after` (anchor created_at, 3600 to 2592000 s), after the file or before it; a bad one is a 400 naming it and stores nothing", async () => {
    const owner = await createKey(app);
    const openai = client(app, owner.key);
    // The SDK sends the file first, then purpose and expires_after[anchor] / expires_after[seconds].
    const hour = await openai.files.create({
      file: await toFile(jsonl(2), "a.jsonl"),
      purpose: "batch",
      expires_after: { anchor: "created_at", seconds: 3600 },
    });
    expect(hour.expires_at).toBe(hour.created_at + 3600);
    expect((await openai.files.retrieve(hour.id)).expires_at).toBe(hour.created_at + 3600);
    const { rows } = await app.deps.pool.query<{ expires_at: Date; created_at: Date }>("SELECT created_at, expires_at FROM files WHERE id = $1", [hour.id]);
    expect(rows[0]!.expires_at.getTime() - rows[0]!.created_at.getTime()).toBe(3600_000);
    // Before the file; longer than the retention (30 days by default): the retention comes first.
    const form = new FormData();
    form.append("purpose", "batch");
    form.append("expires_after[anchor]", "created_at");
    form.append("expires_after[seconds]", "2592000");
    form.append("file", new File([jsonl(2)], "b.jsonl"));
    const early = await fetch(`${app.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${owner.key}` }, body: form });
    expect(early.status).toBe(200);
    const month = (await early.json()) as { created_at: number; expires_at: number };
    expect(month.expires_at).toBe(month.created_at + 30 * 86400);

    const before = await fileRows();
    await expectApiError(
      openai.files.create({ file: await toFile(jsonl(2), "c.jsonl"), purpose: "batch", expires_after: { anchor: "created_at", seconds: 3599 } }),
      400,
      "expires_after.seconds",
    );
    await expectApiError(
      openai.files.create({ file: await toFile(jsonl(2), "c.jsonl"), purpose: "batch", expires_after: { anchor: "created_at", seconds: 2_592_001 } }),
      400,
      "expires_after.seconds",
    );
    await expectApiError(
      openai.files.create({
        file: await toFile(jsonl(2), "c.jsonl"),
        purpose: "batch",
        expires_after: { anchor: "last_active_at" as "created_at", seconds: 3600 },
      }),
      400,
      "expires_after.anchor",
    );
    for (const seconds of ["3600.5", "1e4", "-3600", " 3600", "99999999999", ""]) {
      const bad = new FormData();
      bad.append("file", new File([jsonl(2)], "d.jsonl"));
      bad.append("purpose", "batch");
      bad.append("expires_after[anchor]", "created_at");
      bad.append("expires_after[seconds]", seconds);
      const answer = await fetch(`${app.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${owner.key}` }, body: bad });
      expect(answer.status, seconds).toBe(400);
      expect(((await answer.json()) as { error: { param: string } }).error.param).toBe("expires_after.seconds");
    }
    const anchorOnly = new FormData();
    anchorOnly.append("file", new File([jsonl(2)], "e.jsonl"));
    anchorOnly.append("purpose", "batch");
    anchorOnly.append("expires_after[anchor]", "created_at");
    const noSeconds = await fetch(`${app.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${owner.key}` }, body: anchorOnly });
    expect(noSeconds.status).toBe(400);
    expect(((await noSeconds.json()) as { error: { param: string; code: string } }).error).toMatchObject({
      param: "expires_after.seconds",
      code: "missing_required_parameter",
    });
    expect(await fileRows()).toEqual(before);
  });

  it("refuses too many lines or too many bytes with 400 and stores nothing", async () => {
    const owner = await createKey(limited);
    const openai = client(limited, owner.key);
    const before = await fileRows();
    await expectApiError(openai.files.create({ file: await toFile(jsonl(11), "lines.jsonl"), purpose: "batch" }), 400, "file");
    const ten = await openai.files.create({ file: await toFile(jsonl(10), "ten.jsonl"), purpose: "batch" });
    expect(ten.bytes).toBe(jsonl(10).length);
    await openai.files.delete(ten.id);
    // One line of 100001 bytes: past the byte limit, not the line limit.
    await expectApiError(openai.files.create({ file: await toFile(Buffer.alloc(100_001, 0x61), "big.jsonl"), purpose: "batch" }), 400, "file");
    // Larger than the limit plus the form's overhead: refused from its Content-Length.
    await expectApiError(openai.files.create({ file: await toFile(Buffer.alloc(1_000_000, 0x61), "huge.jsonl"), purpose: "batch" }), 400, "file");
    expect(await fileRows()).toEqual(before);
  });
});

/** A raw POST /v1/files: headers, then `firstBytes` of a body declared `declaredLength` long; resolves with the answer's status. */
function partialUpload(baseUrl: string, key: string, declaredLength: number, firstBytes: Buffer): Promise<{ status: number; ms: number }> {
  const url = new URL("/v1/files", baseUrl);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "multipart/form-data; boundary=xyz", "content-length": String(declaredLength) },
    });
    req.on("response", (response) => {
      response.resume();
      resolve({ status: response.statusCode ?? 0, ms: Date.now() - started });
      req.destroy();
    });
    req.on("error", (error) => reject(error));
    req.write(firstBytes);
  });
}

describe("Files API: authentication before the body, bounded memory", () => {
  it("refuses an upload with a bad key before reading its body (the answer comes while the body is still unsent)", async () => {
    const before = await fileRows();
    const head = Buffer.from('--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n');
    // 200 MB declared, 64 KiB sent: an answer can only come from a server that did not wait for the body.
    const badKey = await partialUpload(app.baseUrl, "sk-not-a-valid-key", 200 * 1024 * 1024, Buffer.concat([head, Buffer.alloc(65536, 0x61)]));
    expect(badKey.status).toBe(403);
    // The refusal waits at most the server's bounded drain of the unread body (2 s), never for the body.
    expect(badKey.ms).toBeLessThan(15_000);
    const missing = await partialUpload(app.baseUrl, "", 200 * 1024 * 1024, head);
    expect(missing.status).toBe(403);
    expect(await fileRows()).toEqual(before);
  });

  it("streams a 50 MB upload and download through the API with memory far below the file's size", async () => {
    const owner = await createKey(app);
    const { setFlagsFromString } = await import("node:v8");
    const { runInNewContext } = await import("node:vm");
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const retained = () => {
      // Twice: the first collection may leave freed buffers' memory to be released by the next.
      gc();
      gc();
      const usage = process.memoryUsage();
      return usage.heapUsed + usage.arrayBuffers;
    };
    const size = 50 * 1024 * 1024;
    const piece = Buffer.alloc(64 * 1024, 0x61);
    piece[piece.length - 1] = 0x0a; // 800 lines of 64 KiB
    const head = Buffer.from('--xyz\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n');
    const tail = Buffer.from('\r\n--xyz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--xyz--\r\n');
    const baseline = retained();
    let peakUpload = 0;

    const uploaded = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(new URL("/v1/files", app.baseUrl), {
        method: "POST",
        headers: {
          authorization: `Bearer ${owner.key}`,
          "content-type": "multipart/form-data; boundary=xyz",
          "content-length": String(head.length + size + tail.length),
        },
      });
      req.on("response", (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (c: Buffer) => chunks.push(c));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      });
      req.on("error", reject);
      let sent = 0;
      const write = () => {
        while (sent < size) {
          sent += piece.length;
          // Sampled while the server holds most of the file in flight, if it held it.
          if (sent % (10 * 1024 * 1024) === 0) peakUpload = Math.max(peakUpload, retained() - baseline);
          if (!req.write(piece)) return void req.once("drain", write);
        }
        req.end(tail);
      };
      req.write(head);
      write();
    });
    expect(uploaded.status, uploaded.body).toBe(200);
    const file = JSON.parse(uploaded.body) as { id: string; bytes: number };
    expect(file.bytes).toBe(size);

    let peakDownload = 0;
    let received = 0;
    let nextSample = 10 * 1024 * 1024;
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(new URL(`/v1/files/${file.id}/content`, app.baseUrl), { headers: { authorization: `Bearer ${owner.key}` } });
      req.on("response", resolve);
      req.on("error", reject);
      req.end();
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-length"]).toBe(String(size));
    for await (const chunk of response as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (received >= nextSample) {
        peakDownload = Math.max(peakDownload, retained() - baseline);
        nextSample += 10 * 1024 * 1024;
      }
    }
    expect(received).toBe(size);
    // Buffering the file whole would retain at least 10-50 MB at the samples; streaming keeps a few chunks.
    expect(peakUpload).toBeLessThan(12 * 1024 * 1024);
    expect(peakDownload).toBeLessThan(12 * 1024 * 1024);
    const { rows } = await app.deps.pool.query("SELECT count(*)::int AS n, max(length(content))::int AS largest FROM file_chunks WHERE file_id = $1", [
      file.id,
    ]);
    expect(rows[0]).toEqual({ n: 50, largest: 1024 * 1024 });
    await client(app, owner.key).files.delete(file.id);
  }, 120_000);
});
