import { z } from "zod";

/**
 * Events of the `account-<id>` stream. Past tense, `type` equals the name; never rename one: add a
 * V2 and an upcaster. Money in integer micro-CHF. Key events carry the SHA-256 of the secret only.
 */
export const AccountRegisteredSchema = z.object({
  type: z.literal("AccountRegistered"),
  data: z.object({ accountId: z.string(), email: z.string(), registeredAt: z.string() }),
});
export const SubscriptionActivatedSchema = z.object({
  type: z.literal("SubscriptionActivated"),
  data: z.object({ accountId: z.string(), activatedAt: z.string() }),
});
export const SubscriptionCancelledSchema = z.object({
  type: z.literal("SubscriptionCancelled"),
  data: z.object({ accountId: z.string(), cancelledAt: z.string() }),
});
export const MonthlyBudgetSetSchema = z.object({
  type: z.literal("MonthlyBudgetSet"),
  data: z.object({ accountId: z.string(), monthlyBudgetMicroChf: z.number().int().nonnegative(), setAt: z.string() }),
});
/** One subscription's rate limits; null: the deployment's default (config). */
export const RateLimitsSchema = z.object({
  requestsPerMinute: z.number().int().positive().nullable(),
  tokensPerMinute: z.number().int().positive().nullable(),
  concurrentRequests: z.number().int().positive().nullable(),
  keyRequestsPerMinute: z.number().int().positive().nullable(),
  keyTokensPerMinute: z.number().int().positive().nullable(),
  keyConcurrentRequests: z.number().int().positive().nullable(),
});
export type RateLimits = z.infer<typeof RateLimitsSchema>;
export const NO_RATE_LIMITS: RateLimits = {
  requestsPerMinute: null,
  tokensPerMinute: null,
  concurrentRequests: null,
  keyRequestsPerMinute: null,
  keyTokensPerMinute: null,
  keyConcurrentRequests: null,
};
/** The operator set the subscription's rate limits (the whole set: a null falls back to the default). */
export const RateLimitsSetSchema = z.object({
  type: z.literal("RateLimitsSet"),
  data: z.object({ accountId: z.string(), limits: RateLimitsSchema, setAt: z.string() }),
});
export const KeyCreatedSchema = z.object({
  type: z.literal("KeyCreated"),
  data: z.object({
    accountId: z.string(),
    keyId: z.string(),
    name: z.string(),
    /** Hex SHA-256 of the full secret. */
    keyHash: z.string(),
    /** Last 4 characters of the secret, for the masked form. */
    last4: z.string(),
    createdAt: z.string(),
  }),
});
export const KeyRenamedSchema = z.object({
  type: z.literal("KeyRenamed"),
  data: z.object({ accountId: z.string(), keyId: z.string(), name: z.string(), renamedAt: z.string() }),
});
export const KeyRevokedSchema = z.object({
  type: z.literal("KeyRevoked"),
  data: z.object({ accountId: z.string(), keyId: z.string(), revokedAt: z.string() }),
});

export const AccountEventSchema = z.discriminatedUnion("type", [
  AccountRegisteredSchema,
  SubscriptionActivatedSchema,
  SubscriptionCancelledSchema,
  MonthlyBudgetSetSchema,
  RateLimitsSetSchema,
  KeyCreatedSchema,
  KeyRenamedSchema,
  KeyRevokedSchema,
]);

export type AccountEvent = z.infer<typeof AccountEventSchema>;
export type AccountRegistered = z.infer<typeof AccountRegisteredSchema>;
export type KeyCreated = z.infer<typeof KeyCreatedSchema>;
export type KeyRenamed = z.infer<typeof KeyRenamedSchema>;
export type KeyRevoked = z.infer<typeof KeyRevokedSchema>;

export const accountStreamId = (accountId: string) => `account-${accountId}`;
export const ACCOUNT_STREAM_TYPE = "account";
