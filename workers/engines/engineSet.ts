import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import type { Engine } from "./engine.ts";

export type EngineFactory = (model: RegisteredModel) => Promise<Engine>;

/**
 * The engines of one worker: each distinct engine configuration is loaded once, so registry entries that
 * serve the same GGUF file under different ids (a chat id and an embeddings id) share one loaded model.
 */
export class EngineSet {
  readonly #factory: EngineFactory;
  readonly #loaded = new Map<string, Promise<Engine>>();

  constructor(factory: EngineFactory) {
    this.#factory = factory;
  }

  engineFor(model: RegisteredModel): Promise<Engine> {
    const key = JSON.stringify(model.engine);
    let engine = this.#loaded.get(key);
    if (!engine) {
      engine = this.#factory(model);
      this.#loaded.set(key, engine);
    }
    return engine;
  }

  /** How many jobs of one model the worker takes at once: the registry's maxConcurrency, else what the loaded engine says. */
  static concurrencyOf(model: RegisteredModel, engine: Pick<Engine, "maxConcurrency">): number {
    return model.engine.maxConcurrency ?? engine.maxConcurrency();
  }

  async close(): Promise<void> {
    const engines = await Promise.allSettled(this.#loaded.values());
    this.#loaded.clear();
    await Promise.all(engines.map((e) => (e.status === "fulfilled" ? e.value.close().catch(() => undefined) : undefined)));
  }
}
