import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { writeTinyModel } from "../../tools/gguf/tinyModel.ts";
import { embeddedEngineSuite } from "../support/engines/embeddedEngineSuite.ts";

const directories: string[] = [];
afterAll(async () => {
  for (const directory of directories) await rm(directory, { recursive: true, force: true });
});

embeddedEngineSuite("the tiny generated model", async () => {
  const directory = await mkdtemp(join(tmpdir(), "tiny-model-"));
  directories.push(directory);
  const info = await writeTinyModel(join(directory, "tiny.gguf"));
  return { modelPath: info.path, contextSize: Math.min(info.contextLength, 1024), prompt: "Hello there" };
});
