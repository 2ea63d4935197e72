import { describe, expect, it } from "vitest";
import { createLogger } from "./logger.ts";

function capture(level: "debug" | "info" = "info") {
  const lines: string[] = [];
  const logger = createLogger(level, { service: "svc" }, (line) => lines.push(line));
  return { logger, lines, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("createLogger", () => {
  it("writes one JSON line with time, level name, message, base and own fields", () => {
    const { logger, lines, parsed } = capture();
    logger.child({ role: "api" }).info("hello", { n: 1, outputTokens: 3 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("\n");
    expect(parsed()[0]).toMatchObject({ level: "info", message: "hello", service: "svc", role: "api", n: 1, outputTokens: 3 });
    expect(new Date(parsed()[0]!.time as string).toISOString()).toBe(parsed()[0]!.time);
  });

  it('writes a field its child already carries once (the worker\'s lines had "model" twice)', () => {
    const { logger, lines } = capture();
    logger.child({ role: "worker", model: "m" }).child({ other: 1 }).info("job cancelled", { model: "m", completionId: "c" });
    expect(lines[0]!.match(/"model"/g)).toHaveLength(1);
    expect(lines[0]).toContain('"completionId":"c"');
    expect(lines[0]!.match(/"service"/g)).toHaveLength(1);
  });

  it("drops lines below its level", () => {
    const { logger, lines } = capture("info");
    logger.debug("quiet");
    logger.warn("loud");
    expect(lines.map((l) => JSON.parse(l).message)).toEqual(["loud"]);
  });

  it("redacts secret-named fields at the top and one level down (headers)", () => {
    const { logger, lines, parsed } = capture();
    logger.warn("secrets", {
      apiKey: "sk-top-secret-1",
      sessionToken: "sess-secret-2",
      password: "pw-secret-3",
      headers: { authorization: "Bearer hdr-secret-4", cookie: "c=cookie-secret-5", "x-api-key": "xkey-secret-6", accept: "text/plain" },
    });
    for (const secret of ["secret-1", "secret-2", "secret-3", "secret-4", "secret-5", "secret-6"]) expect(lines[0]).not.toContain(secret);
    expect(parsed()[0]).toMatchObject({ apiKey: "[redacted]", headers: { authorization: "[redacted]", accept: "text/plain" } });
  });

  it("redacts nested secret names whatever their case, in a line's fields and in a child's, and leaves other nested fields as they are", () => {
    const { logger, lines, parsed } = capture();
    logger.child({ upstream: { Authorization: "Bearer child-secret-1", url: "http://u" } }).info("call", {
      request: { "X-Api-Key": "xkey-secret-2", Cookie: "c=secret-3", model: "m" },
      usage: { outputTokens: 3, promptTokens: 2 },
    });
    for (const secret of ["secret-1", "secret-2", "secret-3"]) expect(lines[0]).not.toContain(secret);
    expect(parsed()[0]).toMatchObject({
      upstream: { Authorization: "[redacted]", url: "http://u" },
      request: { "X-Api-Key": "[redacted]", Cookie: "[redacted]", model: "m" },
      usage: { outputTokens: 3, promptTokens: 2 },
    });
  });

  it("writes errors as name, message and stack", () => {
    const { logger, parsed } = capture();
    logger.error("failed", { error: new TypeError("boom") });
    expect(parsed()[0]!.error).toMatchObject({ name: "TypeError", message: "boom" });
  });
});
