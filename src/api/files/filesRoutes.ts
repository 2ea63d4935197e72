import { Readable } from "node:stream";
import Router from "@koa/router";
import type { Context } from "koa";
import { z } from "zod";
import type { AppDeps } from "../appDeps.ts";
import { NotFoundError } from "../http/errors.ts";
import { validate, validated } from "../http/validate.ts";
import { requiredState } from "../http/requestState.ts";
import { toFileObject } from "./fileObject.ts";
import type { FilePurpose } from "./fileStore.ts";
import { receiveUpload } from "./receiveUpload.ts";
import { attachmentDisposition } from "./attachmentDisposition.ts";

const PURPOSES: ReadonlySet<string> = new Set<FilePurpose>(["batch", "batch_output"]);

const ListQuery = z
  .object({
    /** Any purpose OpenAI knows may be asked for (a string, as in its API): one no file here has lists nothing. */
    purpose: z.string().max(64).optional(),
    limit: z.coerce.number().int().min(1).max(10_000).default(10_000),
    after: z.string().min(1).max(128).optional(),
    order: z.enum(["asc", "desc"]).default("desc"),
  })
  // An unknown parameter is a 400 naming it (as /v1/batches answers), not silently ignored.
  .strict();

function accountOf(ctx: Context): string {
  return requiredState(ctx, "principal").accountId;
}

function fileNotFound(id: string): NotFoundError {
  return new NotFoundError(`No such File object: ${id.slice(0, 128)}`, { param: "id", code: "file_not_found" });
}

/**
 * OpenAI's Files API over the account's files (deps.files): upload (multipart, streamed into the store),
 * list, retrieve, content (streamed out) and delete. Authentication is inferenceAuthRoutes' (mounted
 * before; nothing of the body is read before it); another account's file is not found (404).
 */
export function filesRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  const { maxBytes, maxLines } = deps.config.files;

  router.post("/v1/files", async (ctx) => {
    const file = await receiveUpload(ctx, deps.files, { accountId: accountOf(ctx), maxBytes, maxLines, idleMs: deps.config.bodyIdleTimeoutMs });
    ctx.body = toFileObject(file);
  });

  router.get("/v1/files", validate(ListQuery, "query"), async (ctx) => {
    const { purpose, ...page } = validated(ctx, ListQuery);
    if (purpose !== undefined && !PURPOSES.has(purpose)) {
      ctx.body = { object: "list", data: [], first_id: null, last_id: null, has_more: false };
      return;
    }
    const { files, hasMore } = await deps.files.list(accountOf(ctx), { ...page, ...(purpose ? { purpose: purpose as FilePurpose } : {}) });
    const data = files.map(toFileObject);
    ctx.body = { object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: hasMore };
  });

  router.get("/v1/files/:id", async (ctx) => {
    const file = await deps.files.get(accountOf(ctx), ctx.params.id ?? "");
    if (!file) throw fileNotFound(ctx.params.id ?? "");
    ctx.body = toFileObject(file);
  });

  router.get("/v1/files/:id/content", async (ctx) => {
    const accountId = accountOf(ctx);
    const id = ctx.params.id ?? "";
    const file = await deps.files.get(accountId, id);
    const content = file ? await deps.files.open(accountId, id) : null;
    if (!file || !content) throw fileNotFound(id);
    ctx.type = "application/octet-stream";
    ctx.length = file.bytes;
    ctx.set("content-disposition", attachmentDisposition(file.filename));
    // One chunk read ahead at most: the next is fetched when the socket has taken this one.
    ctx.body = Readable.from(content, { objectMode: false, highWaterMark: 1 });
  });

  router.delete("/v1/files/:id", async (ctx) => {
    const id = ctx.params.id ?? "";
    if (!(await deps.files.delete(accountOf(ctx), id))) throw fileNotFound(id);
    ctx.body = { id, object: "file", deleted: true };
  });

  return router;
}
