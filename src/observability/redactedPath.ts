/** A route's words and the ids this platform puts in paths (`chatcmpl-` + 24, `resp_` + 24, uuids): kept. */
const PLAIN_SEGMENT = /^[0-9A-Za-z_.-]{1,40}$/;
/** Credentials' prefixes (API keys, session and device tokens), whatever follows them. */
const CREDENTIAL = /^(?:sk-|sess_|dev_)/i;

/**
 * A request path, as spans and log lines carry it, with every segment that may be a credential (a client
 * that put its API key or token in the path, by mistake or probing) replaced by `REDACTED`: a segment
 * with a credential's prefix, or one longer than any of this platform's ids or with characters none of
 * them has.
 */
export function redactedPath(path: string): string {
  return path
    .split("/")
    .map((segment) => {
      const decoded = decodedSegment(segment);
      return decoded === "" || (!CREDENTIAL.test(decoded) && PLAIN_SEGMENT.test(decoded)) ? segment : "REDACTED";
    })
    .join("/");
}

function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
