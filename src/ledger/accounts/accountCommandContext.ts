import type { Pool } from "../../db/createPool.ts";
import type { AccountEvent } from "./accountEvents.ts";

/**
 * Told of every account command that appended events, once it has committed. The processes that cache
 * authorisations (API replicas) must hear of revocations, renames and subscription changes; the
 * command path calls this itself, so no front end (key API, admin API, operator CLI) can forget to.
 */
export type AccountChanges = { committed(accountId: string, events: readonly AccountEvent[]): Promise<void> };

/** What account commands run with: the database, and who to tell of committed changes. */
export type AccountCommandContext = { pool: Pool; changes: AccountChanges };
