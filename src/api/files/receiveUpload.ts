import { toStorableText } from "../http/storableText.ts";
import type { Context } from "koa";
import { ApiError, InvalidRequestError } from "../http/errors.ts";
import type { FileStore, StoredFile } from "./fileStore.ts";
import { FileTooLargeError } from "./fileTooLargeError.ts";
import { MultipartError, type MultipartPart, multipartBoundary, multipartParts } from "./multipartParts.ts";

/** What a multipart body may carry besides the file's bytes (boundaries, part headers, the purpose field). */
const FORM_OVERHEAD_BYTES = 64 * 1024;
const MAX_FIELD_BYTES = 1024;
const LIMITS = { maxHeaderBytes: 8 * 1024, maxParts: 16 };
/** The purposes an upload may have: a batch's input. */
const UPLOAD_PURPOSES = new Set(["batch"]);

/** A refusal before the body was read to its end: the answer closes the connection. */
function midBody(error: ApiError): ApiError {
  return new ApiError(error.status, error.type, error.message, { code: error.code, param: error.param, headers: { ...error.headers, connection: "close" } });
}

function checkPurpose(purpose: string | undefined): void {
  if (purpose === undefined) throw new InvalidRequestError("Missing required parameter: 'purpose'.", { param: "purpose", code: "missing_required_parameter" });
  if (!UPLOAD_PURPOSES.has(purpose)) {
    throw new InvalidRequestError(`Invalid 'purpose': '${purpose.slice(0, 64)}' is not supported; this platform accepts 'batch'.`, {
      param: "purpose",
      code: "invalid_value",
    });
  }
}

async function readField(part: MultipartPart): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of part.body) {
    size += chunk.length;
    if (size > MAX_FIELD_BYTES) throw new InvalidRequestError(`The form field '${part.name.slice(0, 64)}' is too long.`, { param: part.name.slice(0, 64) });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function skip(part: MultipartPart): Promise<void> {
  if (part.name === "file") throw new InvalidRequestError("Send one file per upload.", { param: "file" });
  // Other fields OpenAI knows (expires_after[...]) are read and ignored: retention is the platform's.
  await readField(part);
}

/**
 * The request's body, piece by piece, refused past `maxBytes` (the form's bytes, whatever a part says).
 * Leaves the request readable when it stops early (its answer goes out on the same socket).
 */
async function* requestPieces(ctx: Context, maxBytes: number): AsyncGenerator<Buffer> {
  let received = 0;
  try {
    for await (const piece of ctx.req.iterator({ destroyOnReturn: false })) {
      received += (piece as Buffer).length;
      if (received > maxBytes) throw new FileTooLargeError("bytes", maxBytes - FORM_OVERHEAD_BYTES);
      yield piece as Buffer;
    }
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw new InvalidRequestError("The request body was not received completely.", { code: "incomplete_body" });
  }
  if (!ctx.req.complete) throw new InvalidRequestError("The request body was not received completely.", { code: "incomplete_body" });
}

/**
 * POST /v1/files: streams the multipart form's `file` into the store as it arrives, never holding it
 * whole. `purpose` may come before the file (checked at once) or after it (curl and the openai SDK send
 * it after): the content is then complete only once the rest of the form is read and the purpose is
 * valid, so a wrong or missing purpose leaves nothing stored either.
 */
export async function receiveUpload(ctx: Context, store: FileStore, upload: { accountId: string; maxBytes: number; maxLines: number }): Promise<StoredFile> {
  const boundary = multipartBoundary(ctx.get("content-type"));
  if (!boundary) {
    throw midBody(new InvalidRequestError("Upload the file as multipart/form-data with the fields 'file' and 'purpose'.", { code: "invalid_content_type" }));
  }
  const encoding = ctx.get("content-encoding").toLowerCase();
  if (encoding !== "" && encoding !== "identity") {
    throw midBody(new ApiError(415, "invalid_request_error", "Unsupported Content-Encoding; send the form uncompressed.", { code: "unsupported_media_type" }));
  }
  const maxFormBytes = upload.maxBytes + FORM_OVERHEAD_BYTES;
  const declared = ctx.request.length;
  if (declared !== undefined && declared > maxFormBytes) throw midBody(new FileTooLargeError("bytes", upload.maxBytes));
  const parts = multipartParts(requestPieces(ctx, maxFormBytes), boundary, LIMITS);
  try {
    let purpose: string | undefined;
    for (;;) {
      const next = await parts.next();
      if (next.done) break;
      const part = next.value;
      if (part.name === "purpose") {
        purpose = await readField(part);
        checkPurpose(purpose);
        continue;
      }
      if (part.name !== "file" || part.filename === null) {
        await skip(part);
        continue;
      }
      const content = (async function* () {
        yield* part.body;
        // The rest of the form, before the content counts as complete.
        for (;;) {
          const after = await parts.next();
          if (after.done) break;
          if (after.value.name === "purpose") purpose = await readField(after.value);
          else await skip(after.value);
        }
        checkPurpose(purpose);
      })();
      return await store.create({
        accountId: upload.accountId,
        purpose: "batch",
        filename: storedFilename(part.filename),
        content,
        maxBytes: upload.maxBytes,
        maxLines: upload.maxLines,
      });
    }
    checkPurpose(purpose);
    throw new InvalidRequestError("Missing required parameter: 'file'.", { param: "file", code: "missing_required_parameter" });
  } catch (error) {
    if (error instanceof MultipartError)
      throw midBody(new InvalidRequestError(`Malformed multipart/form-data body: ${error.message}`, { code: "invalid_multipart" }));
    if (error instanceof ApiError && !ctx.req.complete) throw midBody(error);
    throw error;
  } finally {
    await parts.return(undefined);
  }
}

/**
 * The name a file is stored under: at most 512 characters (code points: a pair is never split), with
 * what PostgreSQL cannot store (U+0000, an unpaired surrogate) replaced by U+FFFD; "file" when empty.
 */
export function storedFilename(name: string): string {
  return toStorableText([...name].slice(0, 512).join("")) || "file";
}
