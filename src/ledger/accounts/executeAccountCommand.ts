import type { PoolClient } from "../../db/createPool.ts";
import { handleCommand, type HandleCommandResult } from "../eventStore/handleCommand.ts";
import type { EventMetadata } from "../eventStore/types.ts";
import { projectKeyRows } from "./projectKeyRows.ts";
import type { AccountCommandContext } from "./accountCommandContext.ts";
import type { AccountCommand } from "./accountCommands.ts";
import { accountDecider } from "./accountDecider.ts";
import { ACCOUNT_STREAM_TYPE, accountStreamId, type AccountEvent } from "./accountEvents.ts";
import type { AccountState } from "./accountState.ts";
import { projectAccountRow } from "./projectAccountRow.ts";

export type ExecuteAccountCommandOptions = {
  /**
   * An extra step in the same transaction, after the events are appended and the read models updated
   * (e.g. storing the password hash with AccountRegistered). Runs only when events were appended; if it
   * throws, nothing of the command is committed.
   */
  afterAppend?: (client: PoolClient, events: AccountEvent[], state: AccountState) => Promise<void>;
};

/**
 * Runs a command on an account stream: decide, append, and update the inline read models
 * (rm_accounts, rm_keys) in the same transaction, so the change is visible the moment it commits; then,
 * when it appended events, tells `context.changes` (which drops cached authorisations everywhere).
 */
export async function executeAccountCommand(
  context: AccountCommandContext,
  accountId: string,
  command: AccountCommand,
  metadata: EventMetadata = {},
  options: ExecuteAccountCommandOptions = {},
): Promise<HandleCommandResult<AccountState, AccountEvent>> {
  const result = await handleCommand(context.pool, accountDecider, command, {
    streamId: accountStreamId(accountId),
    streamType: ACCOUNT_STREAM_TYPE,
    metadata,
    afterAppend: async (client, events, state) => {
      for (const event of events) {
        await projectAccountRow(client, event);
        await projectKeyRows(client, event);
      }
      if (options.afterAppend) await options.afterAppend(client, events, state);
    },
  });
  if (result.events.length > 0) await context.changes.committed(accountId, result.events);
  return result;
}
