import { CONSOLE_PAGES } from "../../../src/api/console/consoleRoutes.ts";
import { expect } from "vitest";
import { assertOpenAiError, assertOpenAiShape, type OpenAiShape } from "../../support/openaiSchemas/openaiSchemas.ts";

/** Longest a request may take, body included, before it counts as a hang. */
const REQUEST_TIMEOUT_MS = 20_000;

export type FuzzRequest = {
  method: string;
  path: string;
  /** A JSON value (serialised), a raw text body, or none. */
  body?: { json: unknown } | { raw: string };
  headers?: Record<string, string>;
};

export type FuzzAnswer = { status: number; contentType: string; text: string };

export async function send(baseUrl: string, request: FuzzRequest): Promise<FuzzAnswer> {
  const headers: Record<string, string> = { ...request.headers };
  let body: string | undefined;
  if (request.body && "json" in request.body) body = JSON.stringify(request.body.json);
  else if (request.body) body = request.body.raw;
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) headers["content-type"] = "application/json";
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const response = await fetch(baseUrl + request.path, { method: request.method, headers, body, signal });
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get("content-type") ?? "", text };
}

/** The OpenAI shape of a successful /v1 answer, by method and path. */
function successShape(method: string, path: string): { body: OpenAiShape; chunk?: OpenAiShape } | null {
  // The path as fetch sends it: a segment "." or ".." is resolved away (`/v1/models/.` is `/v1/models/`).
  const p = new URL(path, "http://127.0.0.1").pathname;
  if (/^\/v1\/chat\/completions\/?$/.test(p) || /^\/v1\/chat\/completions\/[^/]+\/?$/.test(p))
    return { body: "chat.completion", chunk: "chat.completion.chunk" };
  if (/^\/v1\/completions\/?$/.test(p) || /^\/v1\/completions\/[^/]+\/?$/.test(p)) return { body: "text_completion", chunk: "text_completion.chunk" };
  if (method === "POST" && /^\/v1\/embeddings\/?$/.test(p)) return { body: "embedding.list" };
  if (method === "GET" && /^\/v1\/models\/?$/.test(p)) return { body: "model.list" };
  if (method === "GET" && /^\/v1\/models\/.+/.test(p)) return { body: "model" };
  return null;
}

/**
 * What every answer must be: never a 5xx; an error is a JSON body in the OpenAI error shape; a /v1
 * success is the OpenAI shape of its endpoint (a stream: valid chunks or error events, ending [DONE]).
 */
export function expectWellFormed(request: FuzzRequest, answer: FuzzAnswer): void {
  const where = `${request.method} ${request.path} -> ${answer.status} ${answer.text.slice(0, 300)}`;
  expect(answer.status, where).toBeLessThan(500);
  if (request.method === "HEAD") return;
  if (answer.status >= 400) {
    expect(answer.contentType, where).toMatch(/^application\/json/);
    assertOpenAiError(answer.status, JSON.parse(answer.text));
    return;
  }
  if (answer.status === 204 || request.method === "OPTIONS") return;
  // A path that resolves to the web console (`/v1/..` is `/`; routes match with a trailing slash and in
  // any case: `/Models/` is `/models`) is a page or an asset, not an API answer.
  if (isConsolePath(request.path)) return;
  const shape = request.path.startsWith("/v1/") ? successShape(request.method, request.path) : null;
  if (answer.contentType.startsWith("text/event-stream")) {
    expect(shape?.chunk, where).toBeDefined();
    const events = answer.text
      .split("\n\n")
      .flatMap((block) => block.split("\n").filter((line) => line.startsWith("data: ")))
      .map((line) => line.slice(6));
    expect(events.at(-1), where).toBe("[DONE]");
    for (const data of events.slice(0, -1)) {
      const chunk = JSON.parse(data) as Record<string, unknown>;
      if ("error" in chunk) assertOpenAiShape("error", chunk);
      else assertOpenAiShape(shape!.chunk!, chunk);
    }
    return;
  }
  expect(answer.contentType, where).toMatch(/^application\/json/);
  const body = JSON.parse(answer.text) as unknown;
  if (shape && !/\/cancel\/?$/.test(request.path)) assertOpenAiShape(shape.body, body);
}

/** Whether a request path reaches the web console: one of its pages, or under /console/. */
function isConsolePath(path: string): boolean {
  // Leading slashes collapse as the server takes them (`//` alone would read as a URL without a host).
  const resolved = new URL(path.replace(/^\/+/, "/"), "http://fuzz.invalid").pathname.toLowerCase();
  const page = resolved.length > 1 ? resolved.replace(/\/$/, "") : resolved;
  return CONSOLE_PAGES.includes(page) || page.startsWith("/console/");
}
