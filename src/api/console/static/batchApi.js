/** What an error status of the public API means, in words a console user can act on. */
const STATUS_HINTS = {
  401: "The API key is missing or malformed.",
  402: "Your account has no active subscription, so API calls are refused (402).",
  403: "This API key is invalid or revoked (403).",
};

/**
 * The Batch and Files APIs as the console calls them: the public /v1 endpoints with one of the
 * account's API keys (like any client), never the session cookie.
 */
async function call(apiKey, method, path, body) {
  const headers = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined && !(body instanceof FormData)) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "omit",
    body: body === undefined || body instanceof FormData ? body : JSON.stringify(body),
  });
  if (!response.ok) {
    const data = await response.json().catch(() => null);
    const hint = STATUS_HINTS[response.status];
    throw new Error([hint, data?.error?.message].filter(Boolean).join(" ") || `HTTP ${response.status}`);
  }
  return response;
}

/** POST /v1/files (multipart: purpose "batch", then the file): the uploaded file's object. */
export async function uploadBatchFile(apiKey, file) {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", file, file.name);
  return (await call(apiKey, "POST", "/v1/files", form)).json();
}

/** POST /v1/batches: the new batch's object. */
export async function createBatch(apiKey, { inputFileId, endpoint }) {
  const response = await call(apiKey, "POST", "/v1/batches", { input_file_id: inputFileId, endpoint, completion_window: "24h" });
  return response.json();
}

/** GET /v1/batches: the account's newest batches (up to `limit`), newest first. */
export async function listBatches(apiKey, limit = 20) {
  return (await (await call(apiKey, "GET", `/v1/batches?limit=${limit}`)).json()).data;
}

/** POST /v1/batches/{id}/cancel: the batch's object, now cancelling (or already ended). */
export async function cancelBatch(apiKey, batchId) {
  return (await call(apiKey, "POST", `/v1/batches/${encodeURIComponent(batchId)}/cancel`)).json();
}

/** GET /v1/files/{id}/content as a Blob (the key goes in a header, so a plain link could not fetch it). */
export async function fileContent(apiKey, fileId) {
  return (await call(apiKey, "GET", `/v1/files/${encodeURIComponent(fileId)}/content`)).blob();
}

/** Saves a Blob as a file named `name` through a short-lived blob: URL and a download link. */
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
