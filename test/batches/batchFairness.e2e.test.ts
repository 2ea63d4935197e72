import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../../workers/engines/engine.ts";
import { withChat } from "../inference/withChat.ts";
import { eventually } from "../support/eventually.ts";
import { TINY_CHAT } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { chatLine, uploadBatchFile } from "./batchSteps.ts";

/** The tiny model, but a prompt with "hold" is answered only once `released` (its job keeps its slot meanwhile). */
function holdingEngine(inner: Engine, released: Promise<void>): Engine {
  return withChat(inner, async (request, onDelta, signal, options) => {
    if (JSON.stringify(request.messages).includes("hold")) {
      await Promise.race([released, new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }))]);
    }
    return inner.chat(request, onDelta, signal, options);
  });
}

/**
 * The batch dispatcher shares its ticks between accounts: an account with more batches in progress than
 * a tick takes (100) does not keep another account's batch from being validated and dispatched.
 */
describe("batches of many accounts", () => {
  let batches: BatchTestPlatform;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      env: { BATCH_POLL_MS: "50" },
      wrapEngine: (_model, engine) => holdingEngine(engine, released),
    });
  }, 60_000);

  afterAll(async () => {
    release();
    await batches?.close();
  });

  it("dispatches another account's batch while one account has 101 batches in progress", async () => {
    const platform = batches.platform;
    const busy = platform.openai((await platform.createKey()).key);
    const held = { ...chatLine(1, TINY_CHAT), body: { ...chatLine(1, TINY_CHAT).body, messages: [{ role: "user", content: "hold" }] } };
    const busyFile = await uploadBatchFile(busy, [held]);
    const busyIds: string[] = [];
    for (let i = 0; i < 101; i++) {
      busyIds.push((await busy.batches.create({ input_file_id: busyFile, endpoint: "/v1/chat/completions", completion_window: "24h" })).id);
    }
    await eventually(async () => {
      const running = await platform.deps.pool.query("SELECT 1 FROM batches WHERE id = ANY($1) AND status = 'in_progress'", [busyIds]);
      return running.rowCount === 101 ? true : undefined;
    }, 30_000);

    const other = platform.openai((await platform.createKey()).key);
    const created = await other.batches.create({
      input_file_id: await uploadBatchFile(other, [chatLine(1, TINY_CHAT)]),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    // Its line is claimed (its job queued) within a few ticks, though 101 batches of the other account came first.
    const claimed = await eventually(async () => {
      const line = await platform.deps.pool.query<{ status: string }>("SELECT status FROM batch_lines WHERE batch_id = $1", [created.id]);
      return line.rows[0] && line.rows[0].status !== "waiting" ? line.rows[0].status : undefined;
    }, 10_000);
    expect(["running", "done"]).toContain(claimed);
  }, 120_000);
});
