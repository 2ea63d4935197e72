import type { Engine } from "../../workers/engines/engine.ts";

/** A real engine with its chat() replaced (`chat` may call the engine's own); every other call goes to it. */
export function withChat(inner: Engine, chat: Engine["chat"]): Engine {
  return {
    ...inner,
    capabilities: () => inner.capabilities(),
    countChatTokens: (messages, tools) => inner.countChatTokens(messages, tools),
    countTokens: (text) => inner.countTokens(text),
    maxConcurrency: () => inner.maxConcurrency(),
    embed: (texts, signal) => inner.embed(texts, signal),
    close: () => inner.close(),
    chat,
  };
}
