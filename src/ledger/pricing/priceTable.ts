import { createHash } from "node:crypto";
import { z } from "zod";
import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { canonicalJson } from "../eventStore/canonicalJson.ts";
import { appendToStream } from "../eventStore/appendToStream.ts";
import { ConcurrencyError } from "../eventStore/concurrencyError.ts";
import type { Queryable } from "../eventStore/types.ts";
import type { ModelPrices } from "./costMicroChf.ts";

export const PRICE_TABLE_STREAM = "price-table";
export const PRICE_TABLE_STREAM_TYPE = "pricing";

const PricesSchema = z.object({
  inputMicroChfPerMillion: z.number().int().nonnegative(),
  outputMicroChfPerMillion: z.number().int().nonnegative(),
  /** The Batch API discount in basis points (absent in versions published before batches existed). */
  batchDiscountBps: z.number().int().min(0).max(10_000).optional(),
});

/**
 * PriceTablePublished: one version of the price table, every model's prices (integer micro-CHF per
 * million tokens) and the instant it takes effect. UsageRecorded.priceTableVersion names the version
 * a charge was computed at, so a replay recomputes every charge after prices change.
 */
export const PriceTablePublishedDataSchema = z.object({
  version: z.string().min(1),
  effectiveAt: z.iso.datetime(),
  models: z.record(z.string(), PricesSchema),
});
export type PriceTablePublishedData = z.infer<typeof PriceTablePublishedDataSchema>;
export type PriceTable = Record<string, ModelPrices>;

/** A published version as read back from the log. */
export type PriceVersion = PriceTablePublishedData & { streamVersion: number };

/** The published versions, oldest first. */
export async function readPriceVersions(db: Queryable): Promise<PriceVersion[]> {
  const rows = await db.query<{ stream_version: string; data: unknown }>(
    "SELECT stream_version, data FROM es_events WHERE stream_id = $1 AND event_type = 'PriceTablePublished' ORDER BY stream_version",
    [PRICE_TABLE_STREAM],
  );
  return rows.rows.map((r) => ({ ...PriceTablePublishedDataSchema.parse(r.data), streamVersion: Number(r.stream_version) }));
}

const samePrices = (a: PriceTable, b: PriceTable) => canonicalJson(a) === canonicalJson(b);

/**
 * Makes the registry's prices the current published version (at startup of a role that charges) and
 * returns the version id charges must name. Nothing is appended when the newest version already has
 * these prices. Otherwise a version is published, effective now, under the registry's label, or under
 * `<label>+<digest>` when the label was already published with other prices (a label never names two
 * price tables). Safe to run from several processes at once.
 */
export async function publishPriceTable(pool: Pool, label: string, prices: PriceTable, now: Date): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await withTransaction(pool, async (client) => {
        const head = await client.query<{ version: string }>("SELECT version FROM es_streams WHERE stream_id = $1 FOR UPDATE", [PRICE_TABLE_STREAM]);
        const streamVersion = head.rowCount ? Number(head.rows[0]!.version) : 0;
        const published = await readPriceVersions(client);
        const newest = published.at(-1);
        if (newest && samePrices(newest.models, prices) && (newest.version === label || newest.version.startsWith(`${label}+`))) return newest.version;
        const taken = published.find((p) => p.version === label);
        const version = taken ? `${label}+${createHash("sha256").update(canonicalJson(prices)).digest("hex").slice(0, 12)}` : label;
        const data: PriceTablePublishedData = { version, effectiveAt: now.toISOString(), models: prices };
        await appendToStream(
          client,
          PRICE_TABLE_STREAM,
          PRICE_TABLE_STREAM_TYPE,
          [{ type: "PriceTablePublished", data, metadata: { actor: "system" } }],
          streamVersion,
        );
        return version;
      });
    } catch (error) {
      if (error instanceof ConcurrencyError && attempt < 3) continue;
      throw error;
    }
  }
}
