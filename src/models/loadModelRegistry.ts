import { readFile } from "node:fs/promises";
import path from "node:path";
import { ModelRegistry } from "./modelRegistry.ts";
import { RegistryFileSchema } from "./modelRegistrySchema.ts";

export class ModelRegistryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelRegistryError";
  }
}

/** Reads and validates the registry file; embedded model paths are resolved relative to the file. */
export async function loadModelRegistry(file: string): Promise<ModelRegistry> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new ModelRegistryError(`Cannot read the model registry ${file}: ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ModelRegistryError(`The model registry ${file} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = RegistryFileSchema.safeParse(json);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join(".")}: ${issue.message}`);
    throw new ModelRegistryError(`Invalid model registry ${file}:\n${lines.join("\n")}`);
  }
  const dir = path.dirname(path.resolve(file));
  const models = parsed.data.models.map((model) =>
    "path" in model.engine ? { ...model, engine: { ...model.engine, path: path.resolve(dir, model.engine.path) } } : model,
  );
  return new ModelRegistry(parsed.data.price_table_version, models);
}
