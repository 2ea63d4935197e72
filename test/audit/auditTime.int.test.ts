import { execFile } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseAuditTime } from "../../projections/audit/auditTime.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/**
 * `npm run audit -- verify --from/--to`: a time is read with its offset, the same on every host; a
 * time without one (which the host's time zone would decide) is refused.
 */
describe("audit verify times", () => {
  it("reads a time with Z or an offset as that instant", () => {
    expect(parseAuditTime("2026-01-31T00:00:00Z").toISOString()).toBe("2026-01-31T00:00:00.000Z");
    expect(parseAuditTime("2026-01-31T00:00Z").toISOString()).toBe("2026-01-31T00:00:00.000Z");
    expect(parseAuditTime("2026-01-31T00:00:00.123456Z").toISOString()).toBe("2026-01-31T00:00:00.123Z");
    expect(parseAuditTime("2026-01-31T01:30:00+01:30").toISOString()).toBe("2026-01-31T00:00:00.000Z");
    expect(parseAuditTime("2026-01-30T19:00:00-0500").toISOString()).toBe("2026-01-31T00:00:00.000Z");
    expect(parseAuditTime("2026-01-31t00:00:00z").toISOString()).toBe("2026-01-31T00:00:00.000Z");
  });

  it("refuses a time without an offset, a date alone, and fields out of range", () => {
    expect(() => parseAuditTime("2026-01-31T00:00:00")).toThrow(/no offset: add Z for UTC/);
    expect(() => parseAuditTime("2026-01-31T00:00")).toThrow(/no offset/);
    expect(() => parseAuditTime("2026-01-31")).toThrow(/no offset/);
    expect(() => parseAuditTime("Jan 31 2026")).toThrow(/not an ISO 8601 time with Z or an offset/);
    expect(() => parseAuditTime("2026-02-30T00:00:00Z")).toThrow(/out of range/);
    expect(() => parseAuditTime("2026-01-31T24:00:00Z")).toThrow(/out of range/);
    expect(() => parseAuditTime("2026-01-31T00:00:00+24:00")).toThrow(/out of range/);
  });

  it("the CLI refuses a time without an offset as a usage error (exit 2), whatever the host's time zone", async () => {
    const run = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ["projections/audit/auditCli.ts", "verify", "--from", "2026-01-31T00:00:00"],
        { cwd: ROOT, env: { ...process.env, TZ: "America/New_York" } },
        (error, _stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr }),
      ),
    );
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain("--from: not an ISO 8601 time with Z or an offset");
  });
});
