import { ChatMLChatWrapper, JinjaTemplateChatWrapper, resolveChatWrapper } from "node-llama-cpp";
import type { ChatHistoryItem, ChatWrapper, LlamaModel } from "node-llama-cpp";

const samples: ChatHistoryItem[][] = [
  [
    { type: "system", text: "Be brief." },
    { type: "user", text: "Hello" },
    { type: "model", response: ["Hi there."] },
    { type: "user", text: "How are you?" },
    { type: "model", response: [] },
  ],
  [
    { type: "user", text: "One" },
    { type: "model", response: [] },
  ],
];

/**
 * The chat wrapper for the model's own chat template. node-llama-cpp's resolver compares a Jinja template with
 * every built-in wrapper, which takes about a second; a plain ChatML template (the project's own models) is
 * recognised first by rendering a few chats both ways and comparing the tokens, which takes milliseconds.
 */
export function resolveModelChatWrapper(model: LlamaModel): ChatWrapper {
  const template = model.fileInfo.metadata.tokenizer?.chat_template;
  if (typeof template === "string" && template.includes("<|im_start|>") && rendersLikeChatML(model, template)) return new ChatMLChatWrapper();
  return resolveChatWrapper(model, { warningLogs: false });
}

function rendersLikeChatML(model: LlamaModel, template: string): boolean {
  try {
    const jinja = new JinjaTemplateChatWrapper({ template, tokenizer: model.tokenizer, functionCallMessageTemplate: "noJinja" });
    const chatML = new ChatMLChatWrapper();
    // The ChatML wrapper starts with BOS; a template may leave that to the tokenizer, so a leading BOS is ignored.
    const render = (wrapper: ChatWrapper, chatHistory: ChatHistoryItem[]) => {
      const tokens = wrapper.generateContextState({ chatHistory }).contextText.tokenize(model.tokenizer);
      return tokens[0] === model.tokens.bos ? tokens.slice(1) : tokens;
    };
    return samples.every((chatHistory) => {
      const expected = render(chatML, chatHistory);
      const actual = render(jinja, chatHistory);
      return expected.length === actual.length && expected.every((token, index) => token === actual[index]);
    });
  } catch {
    return false;
  }
}
