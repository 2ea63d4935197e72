import type { Context } from "koa";
import type { z } from "zod";
import type { RateLimits } from "../../ledger/accounts/accountEvents.ts";
import type { JsonShapeLimits } from "./jsonShapeBudget.ts";

/** Who an inference request acts for, with its subscription's rate limits; set by inferenceAuth. */
export type Principal = { accountId: string; keyId: string; rateLimits: RateLimits };

/** Who a key-management, account or console request acts for; set by sessionAuth. */
export type SessionState = { accountId: string; sessionToken: string; via: "bearer" | "cookie" };

/** What an inference request adds to its access log line (set by CompletionJobs.start). */
export type AccessLogInference = { model: string; inputTokens?: number; outputTokens?: number };

/** What a route may accept: bytes, and the shape limits checked while they arrive. */
/** `public`: a route anyone may call, whose whole body must arrive within PUBLIC_BODY_TIMEOUT_MS. */
export type BodyLimits = { maxBytes?: number; shape?: JsonShapeLimits; public?: boolean };

/** Reads the request body on demand (installed by requestBodies, used by validate). */
export type BodyReader = { read(limits?: BodyLimits): Promise<unknown> };

/**
 * Everything the API's middleware keep on `ctx.state`, each field written by the one middleware named
 * beside it, read and written only through stateOf (Koa types ctx.state as `any`). A handler reads
 * validated input with validated(ctx, schema) and the caller with principalOf / sessionOf.
 */
export type RequestState = {
  /** requestId */
  requestId?: string;
  /** traceRequests (when tracing is on) */
  traceId?: string;
  /** servedRoute: the matched route's template, matched once per request */
  routeTemplate?: string;
  /** traceRequests: the route the server span is named after (read by the Koa instrumentation's hook, instrumentations.ts) */
  spanRoute?: string;
  /** requestBodies */
  bodyReader?: BodyReader;
  /** inviteBody: `100 Continue` was sent (the client waits for it before its body) */
  bodyInvited?: boolean;
  /** validate: the parsed input of each schema it ran with */
  validated?: Map<z.ZodType, unknown>;
  /** inferenceAuth */
  principal?: Principal;
  /** sessionAuth */
  session?: SessionState;
  /** CompletionJobs.start, for the access log */
  inference?: AccessLogInference;
  /** the admin routes' `:account_id` (accountIdParam) */
  accountId?: string;
  /** the key routes' `:keyId` (requireKeyId) */
  keyId?: string;
};

/** The request's state, typed. */
export function stateOf(ctx: Pick<Context, "state">): RequestState {
  return ctx.state;
}

/**
 * A field a middleware mounted before the handler sets. Missing means a route wired without that
 * middleware: a programming error (500), never a client's.
 */
export function requiredState<K extends keyof RequestState>(ctx: Pick<Context, "state">, key: K): NonNullable<RequestState[K]> {
  const value = stateOf(ctx)[key];
  if (value === undefined || value === null) throw new Error(`ctx.state.${key} is not set: the route is mounted without its middleware`);
  return value;
}
