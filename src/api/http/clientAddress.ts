import type { Context, Next } from "koa";
import { InvalidRequestError } from "./errors.ts";

/**
 * One client, one address: the form a proxy or the socket gave it (`1.2.3.4:5678` with its port,
 * `[2001:db8::1]:5678`, the IPv4-mapped `::ffff:1.2.3.4` or `::ffff:102:304`, a zone id, any spelling of an
 * IPv6 address) written in one form, so the limits per address count it once (each form counted as an
 * address of its own: three times the invalid-key limit). An IPv6 address counts as its /64, the least a
 * client holds (every address of a /64 counted apart: no limit at all). Anything else is left as it is.
 */
export function normalAddress(address: string): string {
  const text = address.trim();
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3})(?::\d{1,5})?$/.exec(text);
  if (v4WithPort) return v4WithPort[1]!;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text);
  const v6 = ipv6Groups((bracketed ? bracketed[1]! : text).replace(/%.*$/, ""));
  if (!v6) return text.toLowerCase();
  // IPv4-mapped (::ffff:a.b.c.d): the IPv4 address.
  if (v6.slice(0, 5).every((g) => g === 0) && v6[5] === 0xffff) return `${v6[6]! >> 8}.${v6[6]! & 255}.${v6[7]! >> 8}.${v6[7]! & 255}`;
  return `${v6
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":")}::/64`;
}

/** The eight 16-bit groups of an IPv6 address (`::` and a trailing dotted IPv4 allowed), or null. */
function ipv6Groups(text: string): number[] | null {
  if (!text.includes(":") || !/^[0-9a-f:.]+$/i.test(text)) return null;
  let tail: number[] = [];
  let head = text;
  const dotted = /^(.*:)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (dotted) {
    const bytes = dotted[2]!.split(".").map(Number);
    if (bytes.some((b) => b > 255)) return null;
    tail = [(bytes[0]! << 8) | bytes[1]!, (bytes[2]! << 8) | bytes[3]!];
    head = dotted[1]!.endsWith("::") ? dotted[1]! : dotted[1]!.slice(0, -1);
  }
  const halves = head.split("::");
  if (halves.length > 2) return null;
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => (/^[0-9a-f]{1,4}$/i.test(g) ? Number.parseInt(g, 16) : Number.NaN)));
  const left = parse(halves[0]!);
  const right = halves.length === 2 ? parse(halves[1]!) : [];
  const known = left.length + right.length + tail.length;
  if ([...left, ...right].some(Number.isNaN) || known > 8 || (halves.length === 1 && known !== 8) || (halves.length === 2 && known === 8)) return null;
  return [...left, ...Array(8 - known).fill(0), ...right, ...tail];
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
