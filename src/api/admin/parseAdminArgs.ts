import { parseArgs } from "node:util";
import { z } from "zod";
import { AccountIdSchema, EmailSchema } from "../accounts/accountSchemas.ts";
import type { AccountSelector } from "../accounts/findAccount.ts";
import { MonthlyBudgetChfSchema, SubscriptionStatusSchema } from "./adminSchemas.ts";
import type { SubscriptionChange } from "./operatorActions.ts";
import { NO_RATE_LIMITS, type RateLimits } from "../../ledger/accounts/accountEvents.ts";

export const ADMIN_USAGE = `Usage: npm run admin -- <command> [options]

Commands:
  find-account      (--email <email> | --account-id <uuid>)
  set-subscription  (--email <email> | --account-id <uuid>) --status active|inactive [--budget-chf <number>]
                    (without --budget-chf the monthly budget stays as it is)
  set-rate-limits   (--email <email> | --account-id <uuid>) [--requests-per-minute N] [--tokens-per-minute N]
                    [--concurrent-requests N] [--key-requests-per-minute N] [--key-tokens-per-minute N]
                    [--key-concurrent-requests N]
                    (the whole set: a limit not given is the deployment's default)
  export            (--email <email> | --account-id <uuid> | --account <uuid>) [--format ndjson|csv]
                    (the account's history with each event's hashes, to stdout; docs/audit.md)
  help

Connects to DATABASE_URL (migrating it first) and prints the account as JSON (export: the history).`;

export type AdminCommand =
  | { command: "help" }
  | { command: "find-account"; selector: AccountSelector }
  | { command: "set-subscription"; selector: AccountSelector; change: SubscriptionChange }
  | { command: "set-rate-limits"; selector: AccountSelector; limits: RateLimits }
  | { command: "export"; selector: AccountSelector; format: "ndjson" | "csv" };

/** Bad command-line input: the CLI prints the message and the usage, and exits with status 2. */
export class AdminUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AdminUsageError";
  }
}

const DECIMAL = /^\d+(\.\d+)?$/;
const COMMANDS: ReadonlySet<string> = new Set(["find-account", "set-subscription", "set-rate-limits", "export"]);

const OPTIONS = {
  email: { type: "string" },
  "account-id": { type: "string" },
  status: { type: "string" },
  "budget-chf": { type: "string" },
  account: { type: "string" },
  format: { type: "string" },
  "requests-per-minute": { type: "string" },
  "tokens-per-minute": { type: "string" },
  "concurrent-requests": { type: "string" },
  "key-requests-per-minute": { type: "string" },
  "key-tokens-per-minute": { type: "string" },
  "key-concurrent-requests": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Flags as zod sees them: keys are the flag names, so an issue's path names the flag. */
const SelectorFlagsSchema = z
  .object({ email: EmailSchema.optional(), "account-id": AccountIdSchema.optional() })
  .refine((f) => (f.email === undefined) !== (f["account-id"] === undefined), "give exactly one of --email or --account-id");

const SetSubscriptionFlagsSchema = z.object({
  status: SubscriptionStatusSchema,
  "budget-chf": z.string().regex(DECIMAL, "must be a number >= 0, e.g. 50 or 12.5").transform(Number).pipe(MonthlyBudgetChfSchema).optional(),
});

const LIMIT_FLAGS = {
  "requests-per-minute": "requestsPerMinute",
  "tokens-per-minute": "tokensPerMinute",
  "concurrent-requests": "concurrentRequests",
  "key-requests-per-minute": "keyRequestsPerMinute",
  "key-tokens-per-minute": "keyTokensPerMinute",
  "key-concurrent-requests": "keyConcurrentRequests",
} as const satisfies Record<string, keyof RateLimits>;

const PositiveIntegerFlag = z
  .string()
  .regex(/^[1-9]\d{0,12}$/, "must be a positive integer")
  .transform(Number)
  .optional();

function parseFlags<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const flag = issue.path.length ? `--${String(issue.path[0])}: ` : "";
  // Missing only when the flag was not given (zod 4 does not report an issue's input by default).
  const given = issue.path.length ? (input as Record<string, unknown>)[String(issue.path[0])] : undefined;
  const message = given === undefined && issue.path.length ? "is required" : issue.message;
  throw new AdminUsageError(`${flag}${message}`);
}

function readArgs(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new AdminUsageError((error as Error).message);
  }
}

/** Parses and validates `<command> [options]`; throws AdminUsageError for anything wrong. */
export function parseAdminArgs(argv: string[]): AdminCommand {
  const { values, positionals } = readArgs(argv);
  const [command, ...extra] = positionals;
  if (values.help || command === undefined || command === "help") return { command: "help" };
  // Before the flags are read: `frobnicate` is an unknown command, not a call missing --email.
  if (!COMMANDS.has(command)) throw new AdminUsageError(`unknown command: ${command}`);
  if (extra.length) throw new AdminUsageError(`unexpected argument: ${extra[0]}`);
  if (values.account !== undefined && values["account-id"] !== undefined) throw new AdminUsageError("give --account or --account-id, not both");
  const selectorFlags = parseFlags(SelectorFlagsSchema, { email: values.email, "account-id": values["account-id"] ?? values.account });
  const selector: AccountSelector = selectorFlags.email !== undefined ? { email: selectorFlags.email } : { accountId: selectorFlags["account-id"]! };
  switch (command) {
    case "export": {
      if (values.status !== undefined || values["budget-chf"] !== undefined) throw new AdminUsageError("export takes only an account and --format");
      const format = values.format ?? "ndjson";
      if (format !== "ndjson" && format !== "csv") throw new AdminUsageError("--format: must be ndjson or csv");
      return { command, selector, format };
    }
    case "find-account":
      if (values.status !== undefined || values["budget-chf"] !== undefined || values.format !== undefined) {
        throw new AdminUsageError("find-account takes only --email or --account-id");
      }
      return { command, selector };
    case "set-subscription": {
      if (values.format !== undefined) throw new AdminUsageError("set-subscription takes no --format");
      const flags = parseFlags(SetSubscriptionFlagsSchema, { status: values.status, "budget-chf": values["budget-chf"] });
      const budget = flags["budget-chf"];
      return { command, selector, change: { status: flags.status, ...(budget === undefined ? {} : { monthlyBudgetChf: budget }) } };
    }
    case "set-rate-limits": {
      if (values.format !== undefined || values.status !== undefined || values["budget-chf"] !== undefined) {
        throw new AdminUsageError("set-rate-limits takes only an account and limit flags");
      }
      const limits: RateLimits = { ...NO_RATE_LIMITS };
      for (const [flag, field] of Object.entries(LIMIT_FLAGS) as [keyof typeof LIMIT_FLAGS, keyof RateLimits][]) {
        const value = parseFlags(z.object({ [flag]: PositiveIntegerFlag }), { [flag]: values[flag] })[flag];
        limits[field] = value ?? null;
      }
      return { command, selector, limits };
    }
    default:
      throw new AdminUsageError(`unknown command: ${command}`);
  }
}
