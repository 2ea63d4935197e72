import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import type { PriceVersion } from "../../src/ledger/pricing/priceTable.ts";
import { undeliveredRefund } from "../../src/ledger/budget/undeliveredRefund.ts";
import { canonicalJson } from "../../src/ledger/eventStore/canonicalJson.ts";
import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import { UsageRecordedDataSchema } from "../../src/ledger/usageRecordedEvent.ts";
import { UsageRefundedSchema, type UsageRefundedData } from "../../src/ledger/usageRefundedEvent.ts";
import type { AuditFinding } from "./auditFinding.ts";
import type { ChainRow } from "./verifyChains.ts";

export type ChargeStats = { charges: number; recomputedMicroChf: number; atSupersededVersion: number; refunds: number; refundedMicroChf: number };

/**
 * Recomputes every UsageRecorded charge from its tokens x the prices of the price table version it
 * names: the version must be published and already in effect when the usage was recorded (events
 * written before the hash chain began are exempt from the latter: their version was published later),
 * and the recomputed cost must equal the recorded one. A charge at a version that a newer one had
 * already superseded is counted (a worker that ran with an older registry), not an error.
 */
export class ChargeChecker {
  readonly stats: ChargeStats = { charges: 0, recomputedMicroChf: 0, atSupersededVersion: 0, refunds: 0, refundedMicroChf: 0 };
  /** The refunds met in the walk, each checked against its charge afterwards (checkRefunds). */
  readonly #refunds: { at: { kind: "charge"; streamId: string; version: number }; refund: UsageRefundedData }[] = [];
  readonly #versions: PriceVersion[];
  /** effectiveAt of each version in milliseconds (parsed once, not per charge). */
  readonly #effectiveMs: Map<PriceVersion, number>;
  readonly #report: (finding: AuditFinding) => void;
  readonly #scope: { accountId?: string; from?: Date; to?: Date };

  constructor(versions: PriceVersion[], report: (finding: AuditFinding) => void, scope: { accountId?: string; from?: Date; to?: Date } = {}) {
    this.#versions = versions;
    this.#effectiveMs = new Map(versions.map((v) => [v, Date.parse(v.effectiveAt)]));
    this.#report = report;
    this.#scope = scope;
  }

  check(row: ChainRow): void {
    if (row.event_type === "UsageRefunded") {
      this.#noteRefund(row);
      return;
    }
    if (row.event_type !== "UsageRecorded") return;
    const at = { kind: "charge" as const, streamId: row.stream_id, version: Number(row.stream_version) };
    const parsed = UsageRecordedDataSchema.safeParse(row.data);
    if (!parsed.success) {
      this.#report({ ...at, message: "UsageRecorded does not parse" });
      return;
    }
    const usage = parsed.data;
    if (this.#scope.accountId && usage.accountId !== this.#scope.accountId) return;
    const recordedMs = Date.parse(row.recorded_at);
    if (this.#scope.from && recordedMs < this.#scope.from.getTime()) return;
    if (this.#scope.to && recordedMs >= this.#scope.to.getTime()) return;
    this.stats.charges++;
    const named = this.#versions.filter((v) => v.version === usage.priceTableVersion);
    if (named.length === 0) {
      this.#report({ ...at, message: `charged at price table version "${usage.priceTableVersion}", which was never published` });
      return;
    }
    const inForce = named.filter((v) => this.#effectiveMs.get(v)! <= recordedMs).at(-1);
    const version = inForce ?? (row.hash === null ? named[0]! : undefined);
    if (!version) {
      this.#report({ ...at, message: `charged at price table version "${usage.priceTableVersion}" before it took effect (${named[0]!.effectiveAt})` });
      return;
    }
    const prices = version.models[usage.model];
    if (!prices) {
      this.#report({ ...at, message: `price table version "${version.version}" has no prices for model ${usage.model}` });
      return;
    }
    if (usage.batchDiscountBps !== undefined && usage.batchDiscountBps !== (prices.batchDiscountBps ?? 0)) {
      this.#report({
        ...at,
        message: `batch discount ${usage.batchDiscountBps} bp recorded, price table version "${version.version}" has ${prices.batchDiscountBps ?? 0} bp for ${usage.model}`,
      });
    }
    const cost = costMicroChf(usage, prices, usage.batchDiscountBps ?? 0);
    this.stats.recomputedMicroChf += cost;
    if (cost !== usage.costMicroChf) {
      this.#report({
        ...at,
        message: `recorded cost ${usage.costMicroChf} micro-CHF, recomputed ${cost} (${usage.promptTokens} prompt + ${usage.completionTokens} completion tokens of ${usage.model} at "${version.version}")`,
      });
    }
    const newest = this.#versions.filter((v) => this.#effectiveMs.get(v)! <= recordedMs).at(-1);
    if (newest && newest.version !== version.version) this.stats.atSupersededVersion++;
  }

  #noteRefund(row: ChainRow): void {
    const at = { kind: "charge" as const, streamId: row.stream_id, version: Number(row.stream_version) };
    const parsed = UsageRefundedSchema.shape.data.safeParse(row.data);
    if (!parsed.success) {
      this.#report({ ...at, message: "UsageRefunded does not parse" });
      return;
    }
    if (this.#scope.accountId && parsed.data.accountId !== this.#scope.accountId) return;
    const recordedMs = Date.parse(row.recorded_at);
    if (this.#scope.from && recordedMs < this.#scope.from.getTime()) return;
    if (this.#scope.to && recordedMs >= this.#scope.to.getTime()) return;
    this.stats.refunds++;
    this.stats.refundedMicroChf += parsed.data.costMicroChf;
    this.#refunds.push({ at, refund: parsed.data });
  }

  /**
   * Checks each refund met in the walk against the charge of its stream (read on `db`, in the walk's
   * snapshot): there must be one, and the refund must be what undeliveredRefund gives for it and the
   * tokens the refund says were sent, at the charge's price table version.
   */
  async checkRefunds(db: Queryable): Promise<void> {
    if (this.#refunds.length === 0) return;
    const rows = await db.query<{ stream_id: string; data: unknown }>(
      "SELECT stream_id, data FROM es_events WHERE stream_id = ANY($1::text[]) AND event_type = 'UsageRecorded'",
      [this.#refunds.map((r) => r.at.streamId)],
    );
    const chargeOf = new Map(rows.rows.map((r) => [r.stream_id, UsageRecordedDataSchema.safeParse(r.data)]));
    for (const { at, refund } of this.#refunds) {
      const charge = chargeOf.get(at.streamId);
      if (!charge?.success || charge.data.completionId !== refund.completionId) {
        this.#report({ ...at, message: "UsageRefunded without the charge it refunds in its stream" });
        continue;
      }
      const prices = this.#versions.findLast((v) => v.version === charge.data.priceTableVersion)?.models[charge.data.model] ?? null;
      const expected = undeliveredRefund(charge.data, refund.deliveredCompletionTokens ?? -1, prices, refund.refundedAt);
      if (!expected || canonicalJson(expected) !== canonicalJson(refund)) {
        this.#report({
          ...at,
          message: `refunded ${refund.costMicroChf} micro-CHF (${refund.promptTokens} prompt + ${refund.completionTokens} completion tokens), the charge and the ${refund.deliveredCompletionTokens ?? "no"} tokens sent give ${expected ? `${expected.costMicroChf} micro-CHF (${expected.promptTokens} + ${expected.completionTokens})` : "no refund"}`,
        });
      }
    }
  }
}
