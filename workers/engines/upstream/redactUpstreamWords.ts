import { isIPv6 } from "node:net";
/** What replaces a redacted part of an upstream server's words. */
export const REDACTED = "[redacted]";

/** The longest upstream message kept (a refusal's words, not a page). */
const MAX_MESSAGE_CHARS = 500;
/** How much of a message is looked at (bounds the work of the expressions below). */
const MAX_READ_CHARS = 4_000;

/**
 * Parts of an upstream's words that may name its address or a credential, whatever the credential: URLs,
 * authorization schemes, `key=value` credentials, `sk-`-style keys (masked ones too), AWS access key ids,
 * JWTs, Unix and Windows paths, IPv4 and IPv6 addresses, host:port, dotted host names, and long
 * random-looking tokens (32 or more letters, digits, `+/=_-`, with both letters and digits).
 */
const ADDRESS_OR_SECRET = new RegExp(
  [
    String.raw`\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+`,
    String.raw`\b(?:api[_-]?key|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?key)?|client[_-]?secret|(?:access[_-]?|refresh[_-]?)?token|auth(?:orization)?|passw(?:or)?d|pwd|credentials?|key)\b["']?\s*[:=]\s*["']?(?:(?:Bearer|Basic|Digest|Token)\s+[^\s"',;&]+|(?=[^\s"',;&[\]]*\d)[^\s"',;&[\]]{6,}(?![[\]]))`,
    String.raw`\b(?:Bearer|Basic|Digest)\s+[^\s"',;]+`,
    "(?:sk|pk|rk)[-_][A-Za-z0-9_*.-]{4,}",
    String.raw`\b(?:key|token|secret)[-_][A-Za-z0-9_*.-]{4,}`,
    String.raw`\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{12,}\b`,
    String.raw`\b(?:hf|ghp|gho|ghs|ghu|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_-]{16,}`,
    String.raw`[\w.+-]+@[\w-]+(?:\.[\w-]+)+`,
    String.raw`(?<![\w./])[\w.-]+(?:\/[\w.-]+){2,}`,
    String.raw`\beyJ[\w-]+\.[\w-]+\.[\w-]*`,
    String.raw`(?<![\w.])\/[\w.-]+(?:\/[\w.-]+)+`,
    String.raw`\b[a-z]:\\[^\s"'<>]+`,
    String.raw`\[[0-9a-f:]{2,}\](?::\d{1,5})?`,
    String.raw`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b`,
    String.raw`\b[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{3,5}\b`,
    String.raw`\b(?:[a-z0-9-]+\.){2,}[a-z]{2,24}\b`,
    String.raw`\b[a-z0-9-]+\.(?:internal|local|corp|lan|svc|cluster|intranet|home|localdomain)\b`,
    String.raw`(?=[A-Za-z0-9_+/=-]*\d)(?=[A-Za-z0-9_+/=-]*[A-Za-z])(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/=-]{32,}`,
  ].join("|"),
  "gi",
);

/** What may be a bare IPv6 address (checked with isIPv6: `12:30:45` and `::=` are none). */
const IPV6_CANDIDATE = /(?<![\w:.])[0-9a-f:.]*:[0-9a-f:.]*:[0-9a-f:.]*(?![\w:])/gi;

/** A `param` an upstream names: a field path, or nothing. */
const FIELD_PATH = /^[A-Za-z0-9_.[\]-]{1,64}$/;

/** A NUL, or half of a surrogate pair without its other half. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A configured secret (the upstream's key, its address) as it may appear in a message: in any case, its
 * characters split by punctuation or spaces (`upstream.Secret-Key`), and its base64 forms.
 */
function secretPattern(secret: string): string {
  const escaped = [...secret].map((c) => c.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&"));
  // Split by punctuation only when long enough not to match ordinary words or numbers (a host `10.0.0.5`: `10005`).
  const spelled = escaped.join(secret.length >= 12 ? String.raw`[\s._\-/:]*` : "");
  const base64 = [Buffer.from(secret).toString("base64").replace(/=+$/, ""), Buffer.from(secret).toString("base64url")];
  // A long one: any 12 characters of it in a row too (a message that quotes a part).
  const parts = secret.length > 12 ? Array.from({ length: secret.length - 11 }, (_, i) => escapeRegExp(secret.slice(i, i + 12))) : [];
  return [spelled, ...base64.map((form) => form.replace(/[+/]/g, "\\$&")), ...parts].join("|");
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

/**
 * An upstream server's message as a client (and the worker's log) may read it: the credential it was sent
 * and its address, given as `secrets`, and anything shaped like an address or a credential, replaced by
 * `[redacted]`; at most 500 characters, never a lone half of a surrogate pair or a NUL. Its refusals
 * ("maximum context length is 4096 tokens") stay readable.
 */
export function redactUpstreamWords(message: string, secrets: readonly string[]): string {
  let text = message.length > MAX_READ_CHARS ? message.slice(0, MAX_READ_CHARS) : message;
  // Percent-escapes of printable ASCII read as what they stand for (a key quoted as `upkey%2DS3cret…`).
  text = text.replace(/%([2-7][0-9A-F])/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  const kept = secrets.filter((secret) => secret.length >= 4);
  if (kept.length > 0) text = text.replace(new RegExp(kept.map(secretPattern).join("|"), "gi"), REDACTED);
  text = text
    .replace(IPV6_CANDIDATE, (candidate) => (/[0-9a-f]/i.test(candidate) && isIPv6(candidate) ? REDACTED : candidate))
    .replace(ADDRESS_OR_SECRET, REDACTED);
  if (text.length > MAX_MESSAGE_CHARS) {
    // Not between the halves of a surrogate pair.
    const cut = /[\uD800-\uDBFF]/.test(text.charAt(MAX_MESSAGE_CHARS - 1)) ? MAX_MESSAGE_CHARS - 1 : MAX_MESSAGE_CHARS;
    text = `${text.slice(0, cut)}…`;
  }
  return text.replace(UNSTORABLE, "\uFFFD");
}

/**
 * An upstream's `param` if it is a plain field path that names nothing redactUpstreamWords would hide
 * (it reaches the client as the error's `param`), else null.
 */
export function upstreamParam(param: string | null, secrets: readonly string[] = []): string | null {
  return param !== null && FIELD_PATH.test(param) && redactUpstreamWords(param, secrets) === param ? param : null;
}

/** The strings of an upstream's configuration no message may repeat: its key, its base URL and its host. */
export function upstreamSecrets(baseUrl: string, apiKey: string | undefined): string[] {
  const url = new URL(baseUrl);
  const secrets = [baseUrl.replace(/\/+$/, ""), url.host, url.hostname];
  if (apiKey !== undefined) secrets.unshift(apiKey);
  return secrets.filter((secret) => secret !== "");
}
