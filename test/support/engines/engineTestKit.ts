import type { ChatOptions, ChatRequest, EngineDelta, EngineResult, Engine, TokenLogprob, ToolCall } from "../../../workers/engines/engine.ts";

/** Test helpers for engine suites: run a chat and gather what it streamed. */
export type Collected = {
  text: string;
  reasoning: string;
  deltas: EngineDelta[];
  toolCalls: ToolCall[];
  logprobs: TokenLogprob[];
  result: EngineResult;
};

export const greedy = { maxTokens: 64, temperature: 0, topP: 1, presencePenalty: 0, frequencyPenalty: 0 } as const;

export function userChat(content: string, overrides: Partial<ChatRequest> = {}): ChatRequest {
  return { ...greedy, messages: [{ role: "user", content }], ...overrides };
}

export async function collectChat(engine: Engine, request: ChatRequest, signal = new AbortController().signal, options: ChatOptions = {}): Promise<Collected> {
  const deltas: EngineDelta[] = [];
  const result = await engine.chat(request, (delta) => deltas.push(delta), signal, options);
  return { ...gather(deltas), deltas, result };
}

export function gather(deltas: EngineDelta[]): Omit<Collected, "deltas" | "result"> {
  let text = "";
  let reasoning = "";
  const toolCalls: ToolCall[] = [];
  const logprobs: TokenLogprob[] = [];
  for (const delta of deltas) {
    text += delta.content ?? "";
    reasoning += delta.reasoning ?? "";
    logprobs.push(...(delta.logprobs ?? []));
    for (const call of delta.toolCalls ?? []) {
      const existing = toolCalls[call.index];
      if (existing === undefined) {
        toolCalls[call.index] = {
          id: call.id ?? "",
          type: "function",
          function: { name: call.function?.name ?? "", arguments: call.function?.arguments ?? "" },
        };
      } else {
        existing.function.arguments += call.function?.arguments ?? "";
      }
    }
  }
  return { text, reasoning, toolCalls, logprobs };
}

export function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i += 1) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

export function norm(a: number[]): number {
  return Math.sqrt(a.reduce((sum, value) => sum + value * value, 0));
}
