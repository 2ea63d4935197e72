import type { Decider } from "../eventStore/handleCommand.ts";
import type { RecordedEvent } from "../eventStore/types.ts";
import type { AccountCommand } from "./accountCommands.ts";
import { AccountEventSchema, type AccountEvent } from "./accountEvents.ts";
import { evolveAccount, initialAccountState, type AccountState } from "./accountState.ts";
import { decideAccount } from "./decideAccount.ts";

export const accountDecider: Decider<AccountState, AccountCommand, AccountEvent> = {
  initialState: initialAccountState,
  evolve: evolveAccount,
  decide: decideAccount,
  parseEvent: (event: RecordedEvent) => AccountEventSchema.parse({ type: event.type, data: event.data }),
};
