import { createHash } from "node:crypto";
import type { ServerResponse } from "node:http";
import { chunk, json, type ReceivedRequest, usageChunk, writeSse } from "./upstreamFakeServer.ts";

/**
 * A small, deterministic OpenAI-compatible model behind the fake server (upstreamFakeServer.ts), for
 * the engine conformance suite: it behaves like a vLLM server in every way the upstream adapter relies
 * on, with one word as one token. Chat is streamed one token per chunk, with usage at the end; it honours
 * max_tokens / max_completion_tokens, stop, logprobs / top_logprobs, a forced tool call (a named
 * tool_choice or "required", arguments built from the tool's schema), json_object and json_schema
 * response formats (a value built from the schema), reasoning_effort (a few thought tokens first),
 * vLLM's continue_final_message (the final assistant message is continued and counted as prompt) and a
 * context length (a longer prompt is a 400). /embeddings answers unit vectors derived from each text.
 */
export type FakeModelOptions = { contextLength: number };

const REPLY =
  "Hello from the fake upstream model , which answers every question with the same forty words so that a client can follow the stream , stop it , continue it and count it , one word for each token it generates here and now .".split(
    " ",
  );
const THOUGHT = ["Let", "me", "think", "."];

type Body = {
  messages?: Array<{ role: string; content?: string | null }>;
  max_tokens?: number;
  max_completion_tokens?: number;
  stop?: string[];
  logprobs?: boolean;
  top_logprobs?: number;
  tools?: Array<{ function: { name: string; parameters?: Schema } }>;
  tool_choice?: string | { function: { name: string } };
  response_format?: { type: string; json_schema?: { schema?: Schema } };
  reasoning_effort?: string;
  continue_final_message?: boolean;
  input?: string[];
};
type Schema = { type?: string; enum?: unknown[]; properties?: Record<string, Schema>; items?: Schema };

const words = (text: string): number => text.match(/\S+/g)?.length ?? 0;

export function fakeModel(options: FakeModelOptions) {
  return async (request: ReceivedRequest, res: ServerResponse): Promise<void> => {
    const body = request.body as Body;
    if (request.path.endsWith("/embeddings")) {
      const input = body.input ?? [];
      json(res, 200, {
        data: input.map((text, index) => ({ index, embedding: unitVector(text) })),
        usage: { prompt_tokens: input.reduce((n, t) => n + words(t), 0) },
      });
      return;
    }
    const messages = body.messages ?? [];
    // One token per message for its role, and each word; a final message continued takes the generation prompt's place.
    const continuing = body.continue_final_message === true && messages.at(-1)?.role === "assistant";
    const promptTokens = messages.reduce((n, m) => n + 1 + words(m.content ?? ""), 0) - (continuing ? 1 : 0);
    if (promptTokens > options.contextLength) {
      json(res, 400, {
        error: {
          message: `This model's maximum context length is ${options.contextLength} tokens; the prompt has ${promptTokens}.`,
          type: "BadRequestError",
          param: "messages",
        },
      });
      return;
    }
    const limit = body.max_completion_tokens ?? body.max_tokens ?? 16;
    const pieces: string[] = [];
    let generated = 0;
    let reasoning = 0;
    const emit = (delta: Record<string, unknown>, logprob?: string): void => {
      generated += 1;
      const logprobs = body.logprobs === true && logprob !== undefined ? { content: [tokenLogprob(logprob, body.top_logprobs ?? 0)] } : null;
      pieces.push(chunk({ delta, logprobs }));
    };
    if (body.reasoning_effort !== undefined) {
      for (const word of THOUGHT.slice(0, Math.min(THOUGHT.length, limit - 1))) emit({ reasoning_content: `${word} ` });
      reasoning = generated;
    }
    let finish: "stop" | "length" | "tool_calls" = "stop";
    const forced =
      typeof body.tool_choice === "object" ? body.tool_choice.function.name : body.tool_choice === "required" ? body.tools?.[0]?.function.name : undefined;
    const tool = body.tools?.find((t) => t.function.name === forced);
    if (tool) {
      const id = `call_${createHash("sha256").update(JSON.stringify(messages)).digest("hex").slice(0, 24)}`;
      pieces.push(chunk({ delta: { tool_calls: [{ index: 0, id, type: "function", function: { name: tool.function.name, arguments: "" } }] } }));
      generated += 1;
      for (const part of split(JSON.stringify(schemaValue(tool.function.parameters ?? { type: "object" })))) {
        pieces.push(chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: part } }] } }));
        generated += 1;
      }
      finish = "tool_calls";
    } else {
      const format = body.response_format;
      const answer =
        format?.type === "json_schema"
          ? split(JSON.stringify(schemaValue(format.json_schema?.schema ?? {})))
          : format?.type === "json_object"
            ? split(JSON.stringify({ answer: REPLY.slice(0, 3).join(" ") }))
            : REPLY.map((word, i) => (i === 0 ? word : ` ${word}`));
      // continue_final_message: the reply already begun is prompt; the answer goes on after its words.
      const begun = continuing ? words(messages.at(-1)?.content ?? "") : 0;
      let text = "";
      for (const token of answer.slice(begun)) {
        if (generated >= limit) {
          finish = "length";
          break;
        }
        const stop = (body.stop ?? []).map((s) => (text + token).indexOf(s, Math.max(0, text.length - s.length + 1))).find((at) => at >= 0);
        if (stop !== undefined) {
          if (stop > text.length) emit({ content: (text + token).slice(text.length, stop) }, (text + token).slice(text.length, stop));
          break;
        }
        text += token;
        emit({ content: token }, token);
      }
    }
    pieces.push(chunk({ delta: {}, finish_reason: finish }), usageChunk(promptTokens, generated, reasoning), "data: [DONE]\n\n");
    await writeSse(res, pieces, 2);
    res.end();
  };
}

function split(text: string): string[] {
  return text.match(/.{1,4}/gs) ?? [];
}

function schemaValue(schema: Schema): unknown {
  if (schema.enum !== undefined) return schema.enum[0];
  if (schema.type === "object" || schema.properties !== undefined) {
    return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([name, property]) => [name, schemaValue(property)]));
  }
  if (schema.type === "array") return schema.items ? [schemaValue(schema.items)] : [];
  if (schema.type === "boolean") return true;
  if (schema.type === "integer" || schema.type === "number") return 1;
  if (schema.type === "null") return null;
  return "x";
}

function tokenLogprob(token: string, top: number) {
  const bytes = [...Buffer.from(token, "utf8")];
  const alternatives = Array.from({ length: top }, (_, i) =>
    i === 0 ? { token, logprob: -0.25, bytes } : { token: `alt${i}`, logprob: -1 - i, bytes: [...Buffer.from(`alt${i}`)] },
  );
  return { token, logprob: -0.25, bytes, top_logprobs: alternatives };
}

function unitVector(text: string): number[] {
  const digest = createHash("sha256").update(text).digest();
  const vector = Array.from({ length: 8 }, (_, i) => digest[i]! - 127.5);
  const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
  return vector.map((v) => v / norm);
}
