import { describe, expect, it } from "vitest";
import type { LogFields, Logger } from "./logger.ts";
import { throttledWarning } from "./throttledWarning.ts";

function capturing(): { logger: Logger; lines: { message: string; fields?: LogFields }[] } {
  const lines: { message: string; fields?: LogFields }[] = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (message, fields) => lines.push({ message, ...(fields ? { fields } : {}) }),
    error: () => undefined,
    child: () => logger,
  };
  return { logger, lines };
}

describe("throttledWarning", () => {
  it("logs the first at once, then one per period with how many were left out", () => {
    const { logger, lines } = capturing();
    let now = 0;
    const warn = throttledWarning(logger, "queue worker error", 10_000, () => now);
    for (let i = 0; i < 90; i++) {
      warn({ attempt: i });
      now += 100;
    }
    // 9 s: the first line only; then, past 10 s, one line that counts the 89 left out.
    expect(lines).toEqual([{ message: "queue worker error", fields: { attempt: 0 } }]);
    now = 10_000;
    warn({ attempt: 90 });
    expect(lines[1]).toEqual({ message: "queue worker error", fields: { attempt: 90, suppressed: 89 } });
    now = 25_000;
    warn({ attempt: 91 });
    expect(lines[2]).toEqual({ message: "queue worker error", fields: { attempt: 91 } });
  });
});
