import { chfToMicro } from "../ledger/money.ts";
import type { ModelEntry } from "./modelRegistrySchema.ts";

/** A model of the registry, with its engine path resolved and its prices in integer micro-CHF per million tokens. */
export type RegisteredModel = ModelEntry & {
  priceTableVersion: string;
  inputMicroChfPerMillion: number;
  outputMicroChfPerMillion: number;
  /** The Batch API discount, in basis points of the price (5000: half price). */
  batchDiscountBps: number;
};

/** The models this deployment knows, loaded once from the registry file. */
export class ModelRegistry {
  readonly priceTableVersion: string;
  readonly #models: Map<string, RegisteredModel>;
  readonly #entries: ModelEntry[];

  constructor(priceTableVersion: string, models: ModelEntry[]) {
    this.priceTableVersion = priceTableVersion;
    this.#entries = models;
    this.#models = new Map(
      models.map((model) => [
        model.id,
        {
          ...model,
          priceTableVersion,
          inputMicroChfPerMillion: chfToMicro(model.pricing.input_per_million_chf),
          outputMicroChfPerMillion: chfToMicro(model.pricing.output_per_million_chf),
          batchDiscountBps: Math.round((model.pricing.batch_discount ?? 0.5) * 10_000),
        },
      ]),
    );
  }

  get(id: string): RegisteredModel | undefined {
    return this.#models.get(id);
  }

  all(): RegisteredModel[] {
    return [...this.#models.values()];
  }

  /** Every model's prices, integer micro-CHF per million tokens (what a price table version publishes). */
  prices(): Record<string, { inputMicroChfPerMillion: number; outputMicroChfPerMillion: number; batchDiscountBps: number }> {
    return Object.fromEntries(
      this.all().map((m) => [
        m.id,
        { inputMicroChfPerMillion: m.inputMicroChfPerMillion, outputMicroChfPerMillion: m.outputMicroChfPerMillion, batchDiscountBps: m.batchDiscountBps },
      ]),
    );
  }

  /** The same models, charging under the published price table version `version`. */
  withPriceTableVersion(version: string): ModelRegistry {
    return version === this.priceTableVersion ? this : new ModelRegistry(version, this.#entries);
  }
}
