import { expect } from "vitest";
import { parseSse } from "../inference/inferenceSteps.ts";

/** One chat completion as a test of role processes reads it: its status, id, text and usage. */
export type ChatResult = { status: number; id: string; text: string; usage: unknown };

/**
 * POSTs a chat completion to an API process (streamed with include_usage, or not) and reads the whole
 * answer: a stream must end with `[DONE]` and carry one completion id in every chunk.
 */
export async function chatThrough(api: string, key: string, body: Record<string, unknown>, stream: boolean, signal?: AbortSignal): Promise<ChatResult> {
  const response = await fetch(`${api}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) }),
    ...(signal ? { signal } : {}),
  });
  const raw = await response.text();
  if (response.status !== 200) return { status: response.status, id: "", text: raw, usage: null };
  if (!stream) {
    const parsed = JSON.parse(raw) as { id: string; choices: { message: { content: string } }[]; usage: unknown };
    return { status: 200, id: parsed.id, text: parsed.choices[0]!.message.content, usage: parsed.usage };
  }
  const events = parseSse(raw);
  expect(events.at(-1)?.data).toBe("[DONE]");
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data) as { id: string; choices: { delta?: { content?: string } }[]; usage?: unknown });
  expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  return {
    status: 200,
    id: chunks[0]!.id,
    text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
    usage: chunks.find((c) => c.usage)?.usage ?? null,
  };
}

/** The TestApp.request shape, against a running API process. */
export function requestVia(baseUrl: string) {
  return async (method: string, urlPath: string, options: { body?: unknown; token?: string } = {}) => {
    const response = await fetch(baseUrl + urlPath, {
      method,
      headers: { "content-type": "application/json", ...(options.token ? { authorization: `Bearer ${options.token}` } : {}) },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, text };
  };
}
