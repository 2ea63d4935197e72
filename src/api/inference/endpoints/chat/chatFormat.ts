import type { EngineDeltaMessage, Usage } from "../../../../contracts/deltaMessage.ts";
import type { CollectedReply } from "../../jobs/collectReply.ts";
import { chunkBuilder, chunkFrame, usageBody, type FinishReason, type StreamFormat } from "../../streaming/streamFormat.ts";

type Head = { id: string; created: number; model: string; reasoning: boolean; includeUsage: boolean };

/** chat.completion bodies and chat.completion.chunk events (OpenAI wire format; reasoning as vLLM's reasoning_content). */
export function chatCompletionBody(head: Omit<Head, "includeUsage">, collected: CollectedReply) {
  const { reply, finishReason, usage } = collected;
  const toolCalls = reply.toolCalls;
  return {
    id: head.id,
    object: "chat.completion" as const,
    created: head.created,
    model: head.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant" as const,
          content: toolCalls.length && reply.content === "" ? null : reply.content,
          refusal: null,
          ...(reply.reasoning ? { reasoning_content: reply.reasoning } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        logprobs: reply.logprobs.length ? { content: reply.logprobs, refusal: null } : null,
        finish_reason: finishReason,
      },
    ],
    usage: usageBody(usage, head.reasoning),
  };
}

export function chatStreamFormat(head: Head): StreamFormat {
  const chunk = chunkBuilder("chat.completion.chunk", head);
  const { open, close } = chunkFrame("chat.completion.chunk", head);
  const deltaChunk = (delta: EngineDeltaMessage, first: boolean) => {
    const out: Record<string, unknown> = first ? { role: "assistant" } : {};
    if (delta.reasoning) out.reasoning_content = delta.reasoning;
    if (delta.content !== undefined && (delta.content !== "" || first)) out.content = delta.content;
    if (delta.toolCalls?.length) out.tool_calls = delta.toolCalls;
    if (Object.keys(out).length === 0 && !delta.logprobs?.length) return null;
    if (first && out.content === undefined && !out.tool_calls) out.content = "";
    return chunk([{ index: 0, delta: out, logprobs: delta.logprobs?.length ? { content: delta.logprobs, refusal: null } : null, finish_reason: null }]);
  };
  return {
    deltaJson(delta: EngineDeltaMessage, first: boolean) {
      // deltaChunk's fields in its order (role, reasoning_content, content, tool_calls), as text.
      let fields = first ? '"role":"assistant"' : "";
      if (delta.reasoning) fields += `${fields ? "," : ""}"reasoning_content":${JSON.stringify(delta.reasoning)}`;
      const content = delta.content;
      const calls = delta.toolCalls?.length ? delta.toolCalls : null;
      if (content !== undefined && (content !== "" || first)) fields += `${fields ? "," : ""}"content":${JSON.stringify(content)}`;
      else if (first && !calls) fields += ',"content":""';
      if (calls) fields += `${fields ? "," : ""}"tool_calls":${JSON.stringify(calls)}`;
      const logprobs = delta.logprobs?.length ? `{"content":${JSON.stringify(delta.logprobs)},"refusal":null}` : "null";
      if (fields === "" && logprobs === "null") return null;
      return `${open}[{"index":0,"delta":{${fields}},"logprobs":${logprobs},"finish_reason":null}]${close}`;
    },
    deltaChunk,
    finish(reason: FinishReason, first: boolean) {
      // `content` on every chunk's delta, the finish's too (""): the spec's chunk has a content string, and
      // a client that joins every `delta.content` (Python's "".join) failed on OpenAI's empty finish delta.
      return chunk([{ index: 0, delta: first ? { role: "assistant", content: "" } : { content: "" }, logprobs: null, finish_reason: reason }]);
    },
    usage(usage: Usage) {
      return chunk([], { usage: usageBody(usage, head.reasoning) });
    },
  };
}
