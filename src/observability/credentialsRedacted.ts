/** A character of an API key (base62), or of a session or device token (base64url), as is or percent-encoded. */
const KEY_CHAR = "(?:[A-Za-z0-9]|%[0-9A-Fa-f]{2})";
const TOKEN_CHAR = "(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2})";
/** A prefix (`sk-`, `sess_`, `dev_`) whose characters may be percent-encoded (`sk%2D`, `%73k-`). */
const prefix = (text: string) => [...text].map((c) => `(?:${c.replace("-", "\\-")}|%${c.charCodeAt(0).toString(16)})`).join("");

/**
 * This platform's credentials as a client may send them anywhere (a path, a model name, an id): an API
 * key (`sk-` and base62), a session or device token (`sess_`, `dev_` and base64url), by its prefix,
 * percent-encoded or not, after any character; and a key without its prefix (40 or more letters and
 * digits, both). A word with a dash after `sk` (`risk-assessment-model`) is none.
 */
const CREDENTIAL = new RegExp(
  [
    `${prefix("sk-")}${KEY_CHAR}{20,}`,
    `(?:${prefix("sess_")}|${prefix("dev_")})${TOKEN_CHAR}{20,}`,
    String.raw`(?<![A-Za-z0-9])(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{40,}(?![A-Za-z0-9])`,
  ].join("|"),
  "gi",
);

/**
 * `text` with every credential replaced by `REDACTED`: an error's message and param (they quote what a
 * client sent: "Unknown request URL: GET /v1/sk-…"), and what spans carry of errors (exception events),
 * which go to a trace backend.
 */
export function credentialsRedacted(text: string): string {
  CREDENTIAL.lastIndex = 0;
  return CREDENTIAL.test(text) ? text.replace(CREDENTIAL, "REDACTED") : text;
}
