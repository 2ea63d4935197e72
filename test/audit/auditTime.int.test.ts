import { execFile } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseAuditTime } from "../../projections/audit/auditTime.ts";
import { createTestDatabase } from "../support/testDatabase.ts";

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
    const run = await verify(["--from", "2026-01-31T00:00:00"], { TZ: "America/New_York" });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain("--from: not an ISO 8601 time with Z or an offset");
  });

  it("the CLI refuses a scope that cannot hold anything, and never calls an empty scope a clean audit (exit 2)", async () => {
    const notAnId = await verify(["--account", "not-a-uuid"]);
    expect(notAnId.code, notAnId.stderr).toBe(2);
    expect(notAnId.stderr).toContain("--account: not an account id (a UUID)");
    const reversed = await verify(["--from", "2026-11-28T00:00:00Z", "--to", "2026-11-27T00:00:00Z"]);
    expect(reversed.code, reversed.stderr).toBe(2);
    expect(reversed.stderr).toContain("--from is after --to");
    const db = await createTestDatabase();
    try {
      const noKey = await verify(["--public-key", "/nonexistent/key.pem"], { DATABASE_URL: db.url });
      expect(noKey.code).toBe(2);
      expect(noKey.stderr).toMatch(/^\/nonexistent\/key\.pem: not a readable public key/);
      expect(noKey.stderr).not.toContain("    at ");
      const unknown = await verify(["--account", "00000000-0000-0000-0000-000000000000", "--skip-read-models"], { DATABASE_URL: db.url });
      expect(unknown.code, unknown.stderr).toBe(2);
      expect(unknown.stderr).toContain("nothing was verified: the log holds no event of account 00000000-0000-0000-0000-000000000000");
    } finally {
      await db.drop();
    }
  });
});

function verify(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, ["projections/audit/auditCli.ts", "verify", ...args], { cwd: ROOT, env: { ...process.env, ...env } }, (error, _stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr }),
    ),
  );
}
