import type { AppDeps } from "../appDeps.ts";

export type ConsoleModel = {
  id: string;
  owned_by: string;
  context_length: number;
  pricing: { input_per_million_chf: number; output_per_million_chf: number };
  capabilities: string[];
  /** A worker serving it has a live heartbeat (as GET /v1/models counts it). */
  available: boolean;
};

/** Every model of the registry with its prices and context length, for the console's models page and playground. */
export async function consoleModels(deps: Pick<AppDeps, "inference">): Promise<ConsoleModel[]> {
  const inference = deps.inference;
  if (!inference) return [];
  const all = inference.registry.all();
  const live = new Set(await inference.presence.liveModels(all.map((m) => m.id)));
  return all.map((model) => ({
    id: model.id,
    owned_by: model.owned_by,
    context_length: model.context_length,
    pricing: { input_per_million_chf: model.pricing.input_per_million_chf, output_per_million_chf: model.pricing.output_per_million_chf },
    capabilities: Object.entries(model.capabilities)
      .filter(([, on]) => on)
      .map(([name]) => name),
    available: live.has(model.id),
  }));
}
