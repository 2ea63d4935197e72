import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { AdminUsageError, parseAdminArgs } from "./parseAdminArgs.ts";

const id = "6f1c2a0e-4b7d-4c1e-9a53-0d2f7b8e9a10";

describe("parseAdminArgs", () => {
  it("parses find-account by email (normalised) or by account id", () => {
    expect(parseAdminArgs(["find-account", "--email", " Ada@Example.CH "])).toEqual({ command: "find-account", selector: { email: "ada@example.ch" } });
    expect(parseAdminArgs(["find-account", "--account-id", id.toUpperCase()])).toEqual({ command: "find-account", selector: { accountId: id } });
  });

  it("parses set-subscription with and without a budget", () => {
    expect(parseAdminArgs(["set-subscription", "--email", "a@b.ch", "--status", "active", "--budget-chf", "12.5"])).toEqual({
      command: "set-subscription",
      selector: { email: "a@b.ch" },
      change: { status: "active", monthlyBudgetChf: 12.5 },
    });
    expect(parseAdminArgs(["set-subscription", "--account-id", id, "--status", "inactive"])).toEqual({
      command: "set-subscription",
      selector: { accountId: id },
      change: { status: "inactive" },
    });
  });

  it("parses export with --account, --account-id or --email, NDJSON by default", () => {
    expect(parseAdminArgs(["export", "--account", id])).toEqual({ command: "export", selector: { accountId: id }, format: "ndjson" });
    expect(parseAdminArgs(["export", "--account-id", id, "--format", "csv"])).toEqual({ command: "export", selector: { accountId: id }, format: "csv" });
    expect(parseAdminArgs(["export", "--email", "A@Example.test"])).toMatchObject({ command: "export", selector: { email: "a@example.test" } });
    expect(() => parseAdminArgs(["export", "--account", id, "--format", "xml"])).toThrow(/--format: must be ndjson or csv/);
    expect(() => parseAdminArgs(["export", "--account", id, "--account-id", id])).toThrow(/not both/);
    expect(() => parseAdminArgs(["export", "--account", id, "--status", "active"])).toThrow(AdminUsageError);
    expect(() => parseAdminArgs(["find-account", "--account", id, "--format", "csv"])).toThrow(AdminUsageError);
  });

  it("answers help for no command, `help` and --help", () => {
    for (const argv of [[], ["help"], ["find-account", "--help"]]) expect(parseAdminArgs(argv)).toEqual({ command: "help" });
  });

  it.each([
    [["set-subscription", "--email", "a@b.ch"], "--status: is required"],
    [["set-subscription", "--email", "a@b.ch", "--status", "paused"], "--status"],
    [["set-subscription", "--email", "a@b.ch", "--status", "active", "--budget-chf=-5"], "--budget-chf"],
    [["set-subscription", "--email", "a@b.ch", "--status", "active", "--budget-chf", "lots"], "--budget-chf"],
    [["set-subscription", "--email", "a@b.ch", "--status", "active", "--budget-chf", "2000000000"], "--budget-chf"],
    [["set-subscription", "--email", "a@b.ch", "--status", "active", "--budget-chf", "0.0000145"], "at most 6 decimal places"],
    [["set-subscription", "--status", "active"], "exactly one of --email or --account-id"],
    [["find-account", "--email", "a@b.ch", "--account-id", randomUUID()], "exactly one of --email or --account-id"],
    [["find-account", "--email", "a@b.ch", "--status", "active"], "find-account takes only"],
    [["find-account", "--email", "not-an-email"], "--email"],
    [["find-account", "--account-id", "42"], "--account-id"],
    [["export", "--account-id", "not-a-uuid"], "--account-id"],
    [["find-account", "--email", "a@b.ch", "--verbose"], "--verbose"],
    [["find-account", "extra", "--email", "a@b.ch"], "unexpected argument: extra"],
    [["delete-everything", "--email", "a@b.ch"], "unknown command: delete-everything"],
    [["set-rate-limits", "--email", "a@b.ch", "--requests-per-minute", "0"], "--requests-per-minute"],
    [["set-rate-limits", "--email", "a@b.ch", "--tokens-per-minute", "1.5"], "--tokens-per-minute"],
    [["set-rate-limits", "--email", "a@b.ch", "--status", "active"], "set-rate-limits takes only"],
  ])("refuses %j with a message naming the problem", (argv, mentions) => {
    expect(() => parseAdminArgs(argv)).toThrow(AdminUsageError);
    expect(() => parseAdminArgs(argv)).toThrow(mentions);
    // A flag given with a bad value is not "required": the message says what is wrong with the value.
    if (!mentions.endsWith("is required")) expect(() => parseAdminArgs(argv)).not.toThrow("is required");
  });
});

describe("parseAdminArgs set-rate-limits", () => {
  it("takes the limits given and leaves the others to the defaults (null)", () => {
    expect(parseAdminArgs(["set-rate-limits", "--email", "A@b.ch", "--requests-per-minute", "60", "--key-concurrent-requests", "2"])).toEqual({
      command: "set-rate-limits",
      selector: { email: "a@b.ch" },
      limits: {
        requestsPerMinute: 60,
        tokensPerMinute: null,
        concurrentRequests: null,
        keyRequestsPerMinute: null,
        keyTokensPerMinute: null,
        keyConcurrentRequests: 2,
      },
    });
  });

  it("names an unknown command as such, not as a call missing its account", () => {
    expect(() => parseAdminArgs(["frobnicate"])).toThrow("unknown command: frobnicate");
    expect(() => parseAdminArgs(["frobnicate", "--email", "a@example.com"])).toThrow("unknown command: frobnicate");
  });
});
