import { fileURLToPath } from "node:url";
import { embeddedEngineSuite } from "../support/engines/embeddedEngineSuite.ts";

/** The shipped default model, at the context length the default registry serves it with. */
embeddedEngineSuite("the shipped austen-1m model", async () => ({
  modelPath: fileURLToPath(new URL("../../models/austen-1m.gguf", import.meta.url)),
  contextSize: 2048,
  prompt: "Tell me about Mr. Darcy.",
}));
