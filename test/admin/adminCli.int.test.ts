import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountEvents, newEmail, register, totalEvents } from "../accounts/accountSteps.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

type CliResult = { code: number; stdout: string; stderr: string };

/** Runs a command with the test database as DATABASE_URL, as an operator would. */
function run(file: string, args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env: { ...process.env, DATABASE_URL: app.db.url, ADMIN_TOKEN: "" } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** `node src/admin/cli.ts ...` with this Node (the project's Node 24, as `npm exec -- node` would pick). */
const admin = (...args: string[]) => run(process.execPath, ["src/api/admin/cli.ts", ...args]);

describe("admin CLI", () => {
  it("runs through `npm run admin --` and finds an account by email", async () => {
    const email = newEmail("cli-npm");
    const account = await register(app, email);
    const result = await run("npm", ["run", "--silent", "admin", "--", "find-account", "--email", email.toUpperCase()]);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      id: account.id,
      email,
      created_at: account.created_at,
      subscription: { status: "inactive", monthly_budget_chf: 0 },
    });
  });

  it("sets a subscription by email, then by account id, appending each event once with actor admin:cli", async () => {
    const email = newEmail("cli-sub");
    const account = await register(app, email);
    const first = await admin("set-subscription", "--email", email, "--status", "active", "--budget-chf", "50");
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ id: account.id, subscription: { status: "active", monthly_budget_chf: 50 } });

    const same = await admin("set-subscription", "--account-id", account.id, "--status", "active", "--budget-chf", "50");
    expect(same.code, same.stderr).toBe(0);
    const budget = await admin("set-subscription", "--account-id", account.id, "--status", "active", "--budget-chf", "12.5");
    expect(JSON.parse(budget.stdout).subscription).toEqual({ status: "active", monthly_budget_chf: 12.5 });

    const events = await accountEvents(app, account.id);
    expect(events.map((e) => e.event_type)).toEqual(["AccountRegistered", "SubscriptionActivated", "MonthlyBudgetSet", "MonthlyBudgetSet"]);
    for (const event of events.slice(1)) expect(event.metadata).toEqual({ correlationId: expect.any(String), actor: "admin:cli" });

    const found = await admin("find-account", "--account-id", account.id);
    expect(JSON.parse(found.stdout).subscription).toEqual({ status: "active", monthly_budget_chf: 12.5 });
  });

  it("exits 1 with a clear message for an unknown account, appending nothing", async () => {
    const before = await totalEvents(app);
    const byEmail = await admin("set-subscription", "--email", newEmail("nobody"), "--status", "active");
    const byId = await admin("set-subscription", "--account-id", randomUUID(), "--status", "active");
    const find = await admin("find-account", "--email", newEmail("nobody"));
    for (const result of [byEmail, byId, find]) {
      expect(result.code).toBe(1);
      expect(result.stdout).toBe("");
      expect(result.stderr).toContain("No such account");
    }
    expect(await totalEvents(app)).toBe(before);
  });

  // Every refusal of bad input is covered by src/admin/parseAdminArgs.unit.test.ts; here, the process's answer.
  it.each([
    [["set-subscription", "--email", "a@b.ch", "--status", "paused"], "--status"],
    [["find-account", "--email", "a@b.ch", "--verbose"], "--verbose"],
  ])("exits 2 with a message and the usage for bad input: %j", async (args, mentions) => {
    const result = await admin(...args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(mentions);
    expect(result.stderr).toContain("Usage: npm run admin");
  });

  it("prints the usage for help", async () => {
    const result = await admin("help");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("set-subscription");
  });
});
