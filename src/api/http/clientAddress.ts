import type { Context, Next } from "koa";
import { InvalidRequestError } from "./errors.ts";

/**
 * One client, one address: the form a proxy or the socket gave it (`1.2.3.4:5678` with its port,
 * `[2001:db8::1]:5678`, the IPv4-mapped `::ffff:1.2.3.4`) written as the address alone, so the limits per
 * address count it once (each form counted as an address of its own: three times the invalid-key limit).
 * Anything else is left as it is.
 */
export function normalAddress(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return mapped[1]!;
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(address);
  if (v4WithPort) return v4WithPort[1]!;
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/i.exec(address);
  if (bracketed) return normalAddress(bracketed[1]!);
  return address.toLowerCase();
}

/**
 * The request's client address in its one form (normalAddress), for every limit per address; and a
 * request with two `Authorization` headers is refused 400 (the first was used, while a proxy in front may
 * have read the last: two views of who is calling).
 */
export function clientAddress() {
  return async function normalizeClient(ctx: Context, next: Next): Promise<void> {
    ctx.request.ip = normalAddress(ctx.request.ip);
    if (authorizationHeaders(ctx.req.rawHeaders) > 1) {
      throw new InvalidRequestError("The Authorization header was sent more than once; send it once.", { param: "Authorization", code: "invalid_value" });
    }
    await next();
  };
}

function authorizationHeaders(raw: string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === "authorization") count++;
  return count;
}
