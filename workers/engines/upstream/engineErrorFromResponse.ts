import { CONTEXT_LENGTH_EXCEEDED, EngineError } from "../engine.ts";
import { redactUpstreamWords, upstreamParam } from "./redactUpstreamWords.ts";
import { ErrorBodySchema } from "./upstreamWire.ts";

type UpstreamErrorDetail = { message: string | null; param: string | null };

/** The message and parameter of an upstream error body, whatever dialect the server speaks. */
export function upstreamErrorDetail(text: string): UpstreamErrorDetail {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    const trimmed = text.trim().slice(0, 500);
    return { message: trimmed === "" ? null : trimmed, param: null };
  }
  const parsed = ErrorBodySchema.safeParse(json);
  if (!parsed.success) return { message: null, param: null };
  const body = parsed.data;
  if (typeof body.error === "string") return { message: body.error, param: body.param ?? null };
  if (body.error) return { message: body.error.message ?? null, param: body.error.param ?? body.param ?? null };
  if (typeof body.detail === "string") return { message: body.detail, param: null };
  if (Array.isArray(body.detail) && body.detail.length > 0) {
    const first = body.detail[0]!;
    const loc = (first.loc ?? []).filter((part) => part !== "body");
    const param = loc.length > 0 ? loc.map(String).join(".") : null;
    return { message: first.msg ?? null, param };
  }
  return { message: body.message ?? null, param: body.param ?? null };
}

/**
 * Maps a non-OK upstream answer to the error the API reports:
 * - 400, 413, 422 and other 4xx: the request itself is wrong -> invalid_request, keeping the upstream's
 *   message and `param` so the client learns what to fix.
 * - 401, 403: the operator's upstream key is wrong; 404: the upstream does not serve this model (or the
 *   base URL is wrong) -> unavailable: the client can do nothing but retry later or use another model.
 * - 408, 429, 503 and the gateway errors 502 / 504 (a proxy in front of the engine that cannot reach it
 *   or timed out) -> unavailable.
 * - other 5xx -> internal.
 * The upstream's words are kept without its key, its address (`secrets`, see upstreamSecrets) or anything
 * shaped like an address or a credential (redactUpstreamWords): a 4xx's message reaches the client.
 */
export function engineErrorFromResponse(status: number, text: string, secrets: readonly string[] = []): EngineError {
  const raw = upstreamErrorDetail(text);
  const detail = { message: raw.message === null ? null : redactUpstreamWords(raw.message, secrets), param: upstreamParam(raw.param, secrets) };
  const suffix = detail.message === null ? "" : `: ${detail.message}`;
  if (status === 401 || status === 403) return new EngineError("unavailable", `upstream refused the credentials (${status})${suffix}`);
  if (status === 404) return new EngineError("unavailable", `upstream does not serve the model (404)${suffix}`);
  if (status === 408 || status === 429 || status === 502 || status === 503 || status === 504) {
    return new EngineError("unavailable", `upstream temporarily unavailable (${status})${suffix}`);
  }
  if (status >= 400 && status < 500) {
    // vLLM, llama.cpp's server and others say it in words ("maximum context length", exceed_context_size_error).
    const overflow = /context.length|exceed_context_size/i.test(text) ? CONTEXT_LENGTH_EXCEEDED : null;
    return new EngineError("invalid_request", detail.message ?? `upstream rejected the request (${status})`, detail.param, overflow);
  }
  return new EngineError("internal", `upstream failed (${status})${suffix}`);
}
