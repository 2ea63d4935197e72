/** What replaces a redacted part of an upstream server's words. */
export const REDACTED = "[redacted]";

/** The longest upstream message kept (a refusal's words, not a page). */
const MAX_MESSAGE_CHARS = 500;

/**
 * Parts of an upstream's words that may name its address or a credential: URLs, IP addresses, host:port,
 * Bearer credentials, `sk-`-style keys (masked ones too: `sk-upstr****T123`), file paths, and long
 * random-looking tokens (letters and digits, 32 or more).
 */
const ADDRESS_OR_SECRET = new RegExp(
  [
    String.raw`\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+`,
    String.raw`\bBearer\s+\S+`,
    String.raw`\b(?:sk|pk|rk|key|token|secret)[-_][A-Za-z0-9_*.-]{4,}`,
    String.raw`(?<![\w.])\/[\w.-]+(?:\/[\w.-]+)+`,
    String.raw`\[[0-9a-f:]{2,}\](?::\d{1,5})?`,
    String.raw`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b`,
    String.raw`\b[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{2,5}\b`,
    String.raw`\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b`,
  ].join("|"),
  "gi",
);

/** A `param` an upstream names: a field path, or nothing. */
const FIELD_PATH = /^[A-Za-z0-9_.[\]-]{1,64}$/;

/**
 * An upstream server's message as a client (and the worker's log) may read it: the credential it was sent
 * and its address, given as `secrets`, and anything shaped like an address or a secret, replaced by
 * `[redacted]`; at most 500 characters. Its refusals ("maximum context length is 4096 tokens") stay readable.
 */
export function redactUpstreamWords(message: string, secrets: readonly string[]): string {
  let text = message;
  for (const secret of secrets) if (secret.length >= 4) text = text.split(secret).join(REDACTED);
  text = text.replace(ADDRESS_OR_SECRET, REDACTED);
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;
}

/** An upstream's `param` if it is a plain field path, else null (it reaches the client as the error's `param`). */
export function upstreamParam(param: string | null): string | null {
  return param !== null && FIELD_PATH.test(param) ? param : null;
}

/** The strings of an upstream's configuration no message may repeat: its key, its base URL and its host. */
export function upstreamSecrets(baseUrl: string, apiKey: string | undefined): string[] {
  const url = new URL(baseUrl);
  const secrets = [baseUrl.replace(/\/+$/, ""), url.host, url.hostname];
  if (apiKey !== undefined) secrets.unshift(apiKey);
  return secrets.filter((secret) => secret !== "");
}
