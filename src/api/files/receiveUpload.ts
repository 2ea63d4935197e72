import { toStorableText } from "../http/storableText.ts";
import type { Context } from "koa";
import { ApiError, InvalidRequestError } from "../http/errors.ts";
import { bodyStalled } from "../http/requestBody.ts";
import { inviteBody } from "../http/expectContinue.ts";
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

/** The form's fields besides the file: `purpose`, and OpenAI's `expires_after[anchor]` and `expires_after[seconds]`. */
type FormFields = { purpose?: string; anchor?: string; seconds?: string };

/** Reads a field of the form into `fields`; any other field OpenAI may send is read and ignored. */
async function readFormField(part: MultipartPart, fields: FormFields): Promise<void> {
  if (part.name === "file" && part.filename === null) {
    throw new InvalidRequestError("The 'file' form field is no file: send it with a filename (curl: -F file=@input.jsonl).", {
      param: "file",
      code: "invalid_value",
    });
  }
  if (part.name === "file") throw new InvalidRequestError("Send one file per upload.", { param: "file" });
  const value = await readField(part);
  if (part.name === "purpose") fields.purpose = value;
  else if (part.name === "expires_after[anchor]") fields.anchor = value;
  else if (part.name === "expires_after[seconds]") fields.seconds = value;
}

const MIN_EXPIRES_AFTER_S = 3600;
const MAX_EXPIRES_AFTER_S = 2_592_000;

/**
 * OpenAI's `expires_after` of an upload ({anchor: "created_at", seconds: 3600 to 2592000}): the seconds
 * after its creation when the file expires (with the platform's retention, whichever comes first);
 * undefined when the form has none.
 */
function expiresAfterSeconds(fields: FormFields): number | undefined {
  if (fields.anchor === undefined && fields.seconds === undefined) return undefined;
  if (fields.anchor !== "created_at") {
    throw new InvalidRequestError("Invalid 'expires_after.anchor': the only supported anchor is 'created_at'.", {
      param: "expires_after.anchor",
      code: fields.anchor === undefined ? "missing_required_parameter" : "invalid_value",
    });
  }
  const seconds = fields.seconds === undefined || !/^[0-9]{1,10}$/.test(fields.seconds) ? Number.NaN : Number(fields.seconds);
  if (!(seconds >= MIN_EXPIRES_AFTER_S && seconds <= MAX_EXPIRES_AFTER_S)) {
    throw new InvalidRequestError(
      `Invalid 'expires_after.seconds': an integer between ${MIN_EXPIRES_AFTER_S} (1 hour) and ${MAX_EXPIRES_AFTER_S} (30 days) is required.`,
      { param: "expires_after.seconds", code: fields.seconds === undefined ? "missing_required_parameter" : "invalid_value" },
    );
  }
  return seconds;
}

/** The iterator's next piece, or a 408 when none came within `idleMs` (a stalled client). */
async function nextWithin(pieces: AsyncIterator<unknown>, idleMs: number): Promise<IteratorResult<unknown>> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(bodyStalled(idleMs)), idleMs);
  });
  try {
    return await Promise.race([pieces.next(), stalled]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The request's body, piece by piece, refused past `maxBytes` (the form's bytes, whatever a part says)
 * or when nothing arrives for `idleMs`. Leaves the request readable when it stops early (its answer goes
 * out on the same socket).
 */
async function* requestPieces(ctx: Context, maxBytes: number, idleMs: number): AsyncGenerator<Buffer> {
  let received = 0;
  inviteBody(ctx);
  // The client went away before the form was asked for: nothing more will arrive.
  if (ctx.req.destroyed && !ctx.req.readableEnded) throw new InvalidRequestError("The request body was not received completely.", { code: "incomplete_body" });
  const pieces = ctx.req.iterator({ destroyOnReturn: false });
  try {
    for (;;) {
      const next = await nextWithin(pieces, idleMs);
      if (next.done) break;
      const piece = next.value as Buffer;
      received += piece.length;
      if (received > maxBytes) throw new FileTooLargeError("bytes", maxBytes - FORM_OVERHEAD_BYTES);
      yield piece;
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
export async function receiveUpload(
  ctx: Context,
  store: FileStore,
  upload: { accountId: string; maxBytes: number; maxLines: number; idleMs: number },
): Promise<StoredFile> {
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
  const parts = multipartParts(requestPieces(ctx, maxFormBytes, upload.idleMs), boundary, LIMITS);
  try {
    const fields: FormFields = {};
    for (;;) {
      const next = await parts.next();
      if (next.done) break;
      const part = next.value;
      if (part.name !== "file" || part.filename === null) {
        await readFormField(part, fields);
        // Checked at once when it comes before the file: nothing is stored for a wrong one.
        if (part.name === "purpose") checkPurpose(fields.purpose);
        continue;
      }
      let expiresAfter: number | undefined;
      const content = (async function* () {
        yield* part.body;
        // The rest of the form, before the content counts as complete.
        for (;;) {
          const after = await parts.next();
          if (after.done) break;
          await readFormField(after.value, fields);
        }
        checkPurpose(fields.purpose);
        expiresAfter = expiresAfterSeconds(fields);
      })();
      return await store.create({
        accountId: upload.accountId,
        purpose: "batch",
        filename: storedFilename(part.filename),
        content,
        maxBytes: upload.maxBytes,
        maxLines: upload.maxLines,
        expiresAfterSeconds: () => expiresAfter,
      });
    }
    checkPurpose(fields.purpose);
    expiresAfterSeconds(fields);
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
