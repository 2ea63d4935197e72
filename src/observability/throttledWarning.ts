import type { LogFields, Logger } from "./logger.ts";

/**
 * A warning that may come many times a second while a dependency is away (each connection's errors, each
 * retry): the first is logged at once, then at most one per `everyMs`, saying how many were left out
 * since the last one logged (`suppressed`), so an outage reads as a few lines, not hundreds.
 */
export function throttledWarning(logger: Logger, message: string, everyMs = 10_000, now: () => number = Date.now): (fields?: LogFields) => void {
  let lastAt = Number.NEGATIVE_INFINITY;
  let suppressed = 0;
  return (fields) => {
    const at = now();
    if (at - lastAt < everyMs) {
      suppressed += 1;
      return;
    }
    lastAt = at;
    logger.warn(message, suppressed > 0 ? { ...fields, suppressed } : fields);
    suppressed = 0;
  };
}
