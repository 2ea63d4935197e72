/** A character of a credential, as is or percent-encoded (`%2D`). */
const CHAR = "(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2})";
/** A prefix (`sk-`, `sess_`, `dev_`) whose characters may be percent-encoded (`sk%2D`, `%73k-`). */
const prefix = (text: string) => [...text].map((c) => `(?:${c.replace("-", "\\-")}|%${c.charCodeAt(0).toString(16)})`).join("");

/**
 * This platform's credentials as a client may send them anywhere (a path, a model name, an id): an API
 * key, session or device token by its prefix, percent-encoded or not, after any character; and a key
 * without its prefix (40 or more letters and digits, both).
 */
const CREDENTIAL = new RegExp(
  [
    `(?:${prefix("sk-")}|${prefix("sess_")}|${prefix("dev_")})${CHAR}{20,}`,
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
