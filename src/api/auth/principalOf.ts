import type { Context } from "koa";
import { type Principal, stateOf } from "../http/requestState.ts";

/** Who the request acts for, set by the inference auth middleware. */
export function principalOf(ctx: Context): Principal {
  const { principal } = stateOf(ctx);
  if (!principal) throw new Error("inference route mounted without inferenceAuth");
  return principal;
}
