import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { writeTinyModel } from "../../tools/gguf/tinyModel.ts";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import { describeEngineConformance } from "../support/engines/engineConformance.ts";
import { EMBEDDED_DEFAULTS } from "../support/engines/embeddedEngineSuite.ts";

const directories: string[] = [];
afterAll(async () => {
  for (const directory of directories) await rm(directory, { recursive: true, force: true });
});

// The full conformance run is in embeddedEngine.tiny.int.test.ts (with the engine's own checks). Here only
// what the registry enables: the suite checks the engine refuses the rest cleanly.
describeEngineConformance(
  "the embedded engine with tools, json_schema, logprobs and embeddings disabled",
  { ...EMBEDDED_DEFAULTS, tools: false, json_schema: false, logprobs: false, embeddings: false },
  async () => {
    const directory = await mkdtemp(join(tmpdir(), "tiny-model-"));
    directories.push(directory);
    const info = await writeTinyModel(join(directory, "tiny.gguf"));
    const llama = await createLlama({ gpu: false });
    const capabilities = { tools: false, json_schema: false, logprobs: false, embeddings: false };
    const engine = await EmbeddedEngine.load({ modelPath: info.path, threads: 1, maxConcurrency: 2, contextSize: 512, capabilities }, { llama });
    return { engine, prompt: "Hello there" };
  },
);
