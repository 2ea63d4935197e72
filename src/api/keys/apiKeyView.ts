import { microToChf } from "../../ledger/money.ts";
import { maskedApiKey } from "./apiKeySecret.ts";
import type { KeyRow } from "./findKeyRows.ts";
import type { KeyUsage } from "./keyUsageStats.ts";

/** An API key as the key-management endpoints show it: never the secret, only its masked form. */
export type ApiKeyView = {
  id: string;
  name: string;
  masked_key: string;
  status: "active" | "revoked";
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  usage: {
    total_requests: number;
    total_cost_chf: number;
    last_30_days: { date: string; requests: number; cost_chf: number }[];
  };
};

export function apiKeyView(row: KeyRow, usage: KeyUsage): ApiKeyView {
  return {
    id: row.keyId,
    name: row.name,
    masked_key: maskedApiKey(row.last4),
    status: row.status,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt ? row.lastUsedAt.toISOString() : null,
    revoked_at: row.revokedAt ? row.revokedAt.toISOString() : null,
    usage: {
      total_requests: usage.totalRequests,
      total_cost_chf: microToChf(usage.totalCostMicroChf),
      last_30_days: usage.last30Days.map((day) => ({ date: day.date, requests: day.requests, cost_chf: microToChf(day.costMicroChf) })),
    },
  };
}
