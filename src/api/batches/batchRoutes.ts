import { randomBytes } from "node:crypto";
import Router from "@koa/router";
import type { Context } from "koa";
import type { Queryable } from "../../ledger/eventStore/types.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendBatchEvent } from "../../ledger/batches/batchEvents.ts";
import type { AppDeps } from "../appDeps.ts";
import { ApiError, ConflictError, InvalidRequestError, NotFoundError } from "../http/errors.ts";
import { validate, validated } from "../http/validate.ts";
import { isStorableText } from "../http/storableText.ts";
import { principalOf } from "../auth/principalOf.ts";
import type { FileStore } from "../files/fileStore.ts";
import { type BatchRow, type BatchTokens, toBatchObject } from "./batchObject.ts";
import { batchLineEndpoint } from "./batchLineEndpoints.ts";
import { CreateBatchSchema, ListBatchesQuerySchema } from "./batchSchemas.ts";

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

function newBatchId(): string {
  let id = "batch_";
  for (const byte of randomBytes(24)) id += ALPHABET[byte % ALPHABET.length];
  return id;
}

function requireFiles(deps: AppDeps): FileStore {
  if (!deps.files) throw new ApiError(503, "api_error", "Files are not served by this API process.", { code: "files_unavailable" });
  return deps.files;
}

async function tokensOf(db: Queryable, batchIds: string[]): Promise<Map<string, BatchTokens>> {
  const rows = await db.query<{ batch_id: string; prompt: string; completion: string; reasoning: string }>(
    `SELECT batch_id, sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion, sum(reasoning_tokens) AS reasoning
     FROM batch_lines WHERE batch_id = ANY($1) GROUP BY batch_id`,
    [batchIds],
  );
  return new Map(rows.rows.map((r) => [r.batch_id, { prompt: Number(r.prompt), completion: Number(r.completion), reasoning: Number(r.reasoning) }]));
}

const NO_TOKENS: BatchTokens = { prompt: 0, completion: 0, reasoning: 0 };

async function batchObject(db: Queryable, row: BatchRow): Promise<Record<string, unknown>> {
  return toBatchObject(row, (await tokensOf(db, [row.id])).get(row.id) ?? NO_TOKENS);
}

/** The caller's account's batch, or 404 (another account's batch is not found either). */
async function ownBatch(db: Queryable, ctx: Context): Promise<BatchRow> {
  const id = String(ctx.params.batchId ?? "");
  // An id no batch can have (a client's `%00`) is not found, without a statement PostgreSQL would refuse.
  const row = isStorableText(id)
    ? (await db.query<BatchRow>("SELECT * FROM batches WHERE id = $1 AND account_id = $2", [id, principalOf(ctx).accountId])).rows[0]
    : undefined;
  if (!row) throw new NotFoundError(`No batch found with id '${ctx.params.batchId}'.`, { param: "batch_id", code: "not_found" });
  return row;
}

/**
 * The Batch API: POST /v1/batches (the batch starts `validating`; the dispatcher validates its input
 * file, runs its lines and writes its output and error files), GET /v1/batches/{id}, GET /v1/batches
 * (newest first, `after` and `limit`), POST /v1/batches/{id}/cancel. The owner's keys only (404).
 */
export function batchRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  router.post("/v1/batches", validate(CreateBatchSchema), async (ctx) => {
    const body = validated(ctx, CreateBatchSchema);
    const principal = principalOf(ctx);
    const files = requireFiles(deps);
    if (!batchLineEndpoint(body.endpoint)) {
      throw new InvalidRequestError(`The endpoint ${body.endpoint} is not available for batches yet.`, { param: "endpoint", code: "invalid_value" });
    }
    const file = await files.get(principal.accountId, body.input_file_id);
    if (!file) throw new NotFoundError(`No file found with id '${body.input_file_id}'.`, { param: "input_file_id", code: "file_not_found" });
    if (file.purpose !== "batch") {
      throw new InvalidRequestError(`The file ${file.id} has purpose '${file.purpose}'; a batch reads a file uploaded with purpose 'batch'.`, {
        param: "input_file_id",
        code: "invalid_value",
      });
    }
    const id = newBatchId();
    const createdAt = new Date(Math.floor(deps.clock.now().getTime() / 1000) * 1000);
    const expiresAt = new Date(createdAt.getTime() + deps.config.batches.completionWindowMs);
    const row = await withTransaction(deps.pool, async (client) => {
      const inserted = await client.query<BatchRow>(
        `INSERT INTO batches (id, account_id, key_id, endpoint, input_file_id, completion_window, metadata, status, created_at, expires_at, output_expires_after_s)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'validating', $8, $9, $10) RETURNING *`,
        [
          id,
          principal.accountId,
          principal.keyId,
          body.endpoint,
          file.id,
          body.completion_window,
          body.metadata ? JSON.stringify(body.metadata) : null,
          createdAt,
          expiresAt,
          body.output_expires_after?.seconds ?? null,
        ],
      );
      await appendBatchEvent(
        client,
        {
          type: "BatchCreated",
          data: {
            batchId: id,
            accountId: principal.accountId,
            keyId: principal.keyId,
            endpoint: body.endpoint,
            inputFileId: file.id,
            expiresAt: expiresAt.toISOString(),
          },
        },
        "api",
      );
      return inserted.rows[0]!;
    });
    ctx.body = toBatchObject(row, NO_TOKENS);
  });
  router.get("/v1/batches", validate(ListBatchesQuerySchema, "query"), async (ctx) => {
    const query = validated(ctx, ListBatchesQuerySchema);
    const accountId = principalOf(ctx).accountId;
    const rows = await deps.pool.query<BatchRow>(
      `SELECT * FROM batches WHERE account_id = $1
       AND ($2::text IS NULL OR seq < (SELECT seq FROM batches WHERE id = $2 AND account_id = $1))
       ORDER BY seq DESC LIMIT $3`,
      [accountId, query.after ?? null, query.limit + 1],
    );
    const page = rows.rows.slice(0, query.limit);
    const tokens = await tokensOf(
      deps.pool,
      page.map((r) => r.id),
    );
    const data = page.map((row) => toBatchObject(row, tokens.get(row.id) ?? NO_TOKENS));
    ctx.body = { object: "list", data, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: rows.rows.length > query.limit };
  });
  router.get("/v1/batches/:batchId", async (ctx) => {
    ctx.body = await batchObject(deps.pool, await ownBatch(deps.pool, ctx));
  });
  router.post("/v1/batches/:batchId/cancel", async (ctx) => {
    const batch = await ownBatch(deps.pool, ctx);
    if (batch.status === "cancelling" || batch.status === "cancelled") {
      ctx.body = await batchObject(deps.pool, batch);
      return;
    }
    const updated = await deps.pool.query<BatchRow>(
      "UPDATE batches SET status = 'cancelling', cancelling_at = $2 WHERE id = $1 AND account_id = $3 AND status IN ('validating', 'in_progress') RETURNING *",
      [batch.id, deps.clock.now(), batch.account_id],
    );
    // Changed meanwhile: cancelled by another request (two cancels at once: the same answer as a cancel
    // after it), or ended.
    const row = updated.rows[0] ?? (await deps.pool.query<BatchRow>("SELECT * FROM batches WHERE id = $1", [batch.id])).rows[0] ?? batch;
    if (row.status !== "cancelling" && row.status !== "cancelled") {
      throw new ConflictError(`The batch ${batch.id} is ${row.status}: it can no longer be cancelled.`, { code: "batch_not_cancellable", final: true });
    }
    // The dispatcher running each line stops it at its next pass (BATCH_POLL_MS), charged nothing (its
    // partial reply reaches nobody), and fails the rest unrun.
    ctx.body = await batchObject(deps.pool, row);
  });
  return router;
}
