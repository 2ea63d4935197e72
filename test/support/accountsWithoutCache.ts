import type { Pool } from "../../src/db/createPool.ts";
import type { AccountCommandContext } from "../../src/ledger/accounts/accountCommandContext.ts";

/** Account commands for set-up code that runs where no process caches authorisations (nobody to tell). */
export function accountsWithoutCache(pool: Pool): AccountCommandContext {
  return { pool, changes: { committed: async () => undefined } };
}
