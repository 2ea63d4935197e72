import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { MIGRATIONS_DIR } from "../../src/db/migrate.ts";
import { appendToStream } from "../../src/ledger/eventStore/appendToStream.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { checkpointEverything } from "./auditFixtures.ts";

/**
 * Events written before migration 060 have no hash: the migration seals them per stream, the first
 * hashed event of the stream chains from the seal, and verify recomputes the seal. The pre-chain log is
 * recreated here as an older version wrote it (rows without hashes), then sealed with the migration's
 * own statement.
 */
let db: TestDatabase;
const legacy = `account-${randomUUID()}`;
const legacyOnly = `completion-${randomUUID()}`;

beforeAll(async () => {
  db = await createTestDatabase();
  await operatorEdit(db.pool, async (client) => {
    for (const [stream, type, count] of [
      [legacy, "account", 3],
      [legacyOnly, "completion", 1],
    ] as const) {
      await client.query("INSERT INTO es_streams (stream_id, stream_type, version) VALUES ($1, $2, $3)", [stream, type, count]);
      for (let v = 1; v <= count; v++) {
        await client.query(
          "INSERT INTO es_events (stream_id, stream_version, event_id, event_type, data, metadata, recorded_at) VALUES ($1, $2, $3, 'Old', $4, '{\"actor\":\"old\"}', now())",
          [stream, v, randomUUID(), JSON.stringify({ v, note: "written before the chain", amount: 1.5 })],
        );
      }
    }
    const migration = await readFile(`${MIGRATIONS_DIR}060_tamper_evidence.sql`, "utf8");
    const seal = /UPDATE es_streams s[\s\S]*?WHERE s\.stream_id = l\.stream_id;/.exec(migration)![0];
    await client.query(seal);
  });
  await appendToStream(db.pool, legacy, "account", [{ type: "New", data: { after: true } }], 3);
  await checkpointEverything(db.pool);
});
afterAll(async () => {
  await db.drop();
});

describe("the chain over events from before it", () => {
  it("chains the first new event from the seal, and verify agrees", async () => {
    const row = await db.pool.query<{ prev: string; seal: string }>(
      "SELECT encode(e.prev_hash, 'hex') AS prev, encode(s.legacy_seal, 'hex') AS seal FROM es_events e JOIN es_streams s USING (stream_id) WHERE e.stream_id = $1 AND e.stream_version = 4",
      [legacy],
    );
    expect(row.rows[0]!.prev).toMatch(/^[0-9a-f]{64}$/);
    expect(row.rows[0]!.prev).toBe(row.rows[0]!.seal);
    const report = await verifyAudit(db.pool, { readModels: false });
    expect(report.findings).toEqual([]);
    expect(report.chains.preChainEvents).toBe(4);
    expect(report.sealedStreams).toBe(2);
  });

  it("names the stream whose pre-chain events changed, and one with a pre-chain event removed", async () => {
    await operatorEdit(db.pool, async (c) => {
      await c.query("UPDATE es_events SET data = jsonb_set(data, '{amount}', '2') WHERE stream_id = $1 AND stream_version = 2", [legacy]);
      await c.query("DELETE FROM es_events WHERE stream_id = $1", [legacyOnly]);
    });
    const report = await verifyAudit(db.pool, { readModels: false });
    const sealFindings = report.findings.filter((f) => f.kind === "legacy-seal").map((f) => f.streamId);
    expect(sealFindings.sort()).toEqual([legacy, legacyOnly].sort());
    expect(report.findings).toContainEqual(expect.objectContaining({ kind: "checkpoint", streamId: legacyOnly }));
  });
});
