import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import type { FileStore, NewFile } from "../../src/api/files/fileStore.ts";
import { TEST_ADMIN_TOKEN } from "../support/testApp.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { batchCharges, chatLine, readJsonl, uploadBatchFile, waitForStatus } from "./batchSteps.ts";

/**
 * The Batch API's dispatcher around its edges: an account whose subscription is no longer active runs
 * no line (they wait until it is active again), and a finalizing that dies after writing a file leaves
 * no orphaned file once the batch is finalized again.
 */
describe("the batch dispatcher's gates", () => {
  let platform: TestPlatform;
  let dispatcher: BatchDispatcher | null = null;

  beforeAll(async () => {
    platform = await startTestPlatform({ env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4" } });
  }, 60_000);

  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = null;
  });

  afterAll(async () => {
    await platform?.close();
  });

  const setSubscription = async (accountId: string, status: "active" | "inactive") => {
    const res = await platform.request("PUT", `/api/v1/admin/accounts/${accountId}/subscription`, { body: { status }, token: TEST_ADMIN_TOKEN });
    expect(res.status, res.text).toBe(200);
  };

  it("runs no line of an account whose subscription is inactive; they run once it is active again", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const inputFileId = await uploadBatchFile(
      openai,
      Array.from({ length: 5 }, (_, i) => chatLine(i, TINY_CHAT)),
    );
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await setSubscription(account.accountId, "inactive");
    dispatcher = new BatchDispatcher(platform.deps, platform.inference, platform.deps.files!);
    dispatcher.start();
    await waitForStatusInDb(platform, created.id, "in_progress");
    // Many dispatcher rounds later: nothing claimed, nothing charged.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const lines = await platform.deps.pool.query("SELECT status, attempts FROM batch_lines WHERE batch_id = $1", [created.id]);
    expect(lines.rows.map((r) => [r.status, r.attempts])).toEqual(Array(5).fill(["waiting", 0]));
    expect((await batchCharges(platform.deps.pool, account.accountId)).size).toBe(0);

    await setSubscription(account.accountId, "active");
    const done = await waitForStatus(openai, created.id, ["completed"]);
    expect(done.request_counts).toEqual({ total: 5, completed: 5, failed: 0 });
    expect((await batchCharges(platform.deps.pool, account.accountId)).size).toBe(5);
  }, 60_000);

  it("a finalizing that dies after writing the output file leaves no orphaned file: the next one deletes it and writes both again", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const inputFileId = await uploadBatchFile(openai, [chatLine(1, TINY_CHAT), { ...chatLine(2, "no-such-model"), custom_id: "unknown" }]);
    const store = platform.deps.files!;
    // The store the dispatcher writes through fails once, on the second file of the first finalizing.
    let writes = 0;
    const failingOnce: FileStore = {
      create: async (file: NewFile) => {
        writes++;
        if (writes === 2) throw new Error("the process died while finalizing");
        return store.create(file);
      },
      get: (accountId, fileId) => store.get(accountId, fileId),
      open: (accountId, fileId) => store.open(accountId, fileId),
      list: (accountId, options) => store.list(accountId, options),
      delete: (accountId, fileId) => store.delete(accountId, fileId),
    };
    dispatcher = new BatchDispatcher(platform.deps, platform.inference, failingOnce);
    dispatcher.start();
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const done = await waitForStatus(openai, created.id, ["completed"]);
    expect(writes).toBeGreaterThanOrEqual(4);
    const outputs = (await store.list(account.accountId, { purpose: "batch_output", limit: 100 })).files.map((f) => f.id);
    expect(outputs.sort()).toEqual([done.output_file_id!, done.error_file_id!].sort());
    expect((await readJsonl(openai, done.output_file_id!)).map((l) => l.custom_id)).toEqual(["req-1"]);
    expect((await readJsonl(openai, done.error_file_id!)).map((l) => l.custom_id)).toEqual(["unknown"]);
    const left = await platform.deps.pool.query("SELECT 1 FROM batch_written_files WHERE batch_id = $1", [created.id]);
    expect(left.rowCount).toBe(0);
  }, 60_000);
});

async function waitForStatusInDb(platform: TestPlatform, batchId: string, status: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const row = await platform.deps.pool.query<{ status: string }>("SELECT status FROM batches WHERE id = $1", [batchId]);
    if (row.rows[0]?.status === status) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`batch ${batchId} did not become ${status}`);
}
