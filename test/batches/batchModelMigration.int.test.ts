import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../src/db/migrate.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

/**
 * Migration 074 gives each batch validated before it its `model`: the one model all its lines name, none
 * when they name several, none for a batch still validating or failed.
 */
describe("migration 074: the model of batches validated before it", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    // The database as it was before 074.
    await db.pool.query("ALTER TABLE batches DROP COLUMN model");
    await db.pool.query("DELETE FROM schema_migrations WHERE name = '074_batch_model.sql'");
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function batch(id: string, status: string, models: string[]): Promise<void> {
    await db.pool.query(
      `INSERT INTO batches (id, account_id, key_id, endpoint, input_file_id, completion_window, status, created_at, expires_at)
       VALUES ($1, 'acct', 'key', '/v1/chat/completions', 'file-x', '24h', $2, now(), now() + interval '1 day')`,
      [id, status],
    );
    for (const [i, model] of models.entries()) {
      await db.pool.query(`INSERT INTO batch_lines (batch_id, line_no, custom_id, model, body, completion_id) VALUES ($1, $2, $3, $4, '{}', $5)`, [
        id,
        i + 1,
        `c${i}`,
        model,
        `${id}-${i}`,
      ]);
    }
  }

  it("sets the one model of a batch's lines, and leaves mixed, validating and failed batches without one", async () => {
    await batch("batch_one", "completed", ["m1", "m1", "m1"]);
    await batch("batch_mixed", "in_progress", ["m1", "m2"]);
    await batch("batch_validating", "validating", ["m1"]);
    await batch("batch_failed", "failed", ["m1"]);
    expect(await migrate(db.pool)).toEqual(["074_batch_model.sql"]);
    const rows = await db.pool.query<{ id: string; model: string | null }>("SELECT id, model FROM batches ORDER BY id");
    expect(Object.fromEntries(rows.rows.map((r) => [r.id, r.model]))).toEqual({
      batch_failed: null,
      batch_mixed: null,
      batch_one: "m1",
      batch_validating: null,
    });
  });
});
