import { afterAll, beforeAll, describe, it } from "vitest";
import { type BlackholeScenario, type ConnectionLossPlatform, startConnectionLossPlatform } from "./postgresConnectionLossScenario.ts";

/**
 * PostgreSQL black-holed (packets dropped, nothing refused or closed) for 8 s while streamed chats
 * finish, every role (api, worker, projector) a process of its own behind a TCP proxy: longer than any
 * quick retry, so each finished job's usage can only be recorded once PostgreSQL is back. No process
 * dies; every stream delivers its whole reply and ends within a bound; every reply is charged exactly
 * once within seconds of PostgreSQL's return (its usage chunk showing what was charged); no budget hold
 * is left open. The bigger version is in postgresConnectionLoss.chaos.test.ts.
 */
const SCENARIO: BlackholeScenario = {
  streams: 6,
  beforeMs: 700,
  outageMs: 8000,
  duringOutage: 2,
  endWithinMs: 20_000,
  settledWithinMs: 15_000,
};

let platform: ConnectionLossPlatform;
beforeAll(async () => {
  platform = await startConnectionLossPlatform({ processesPerRole: 1, tokens: 40, tokenDelayMs: 40 });
}, 120_000);
afterAll(async () => {
  await platform?.close();
}, 60_000);

describe("PostgreSQL black-holed while generations finish, every role a process of its own", () => {
  it("records every delivered reply's usage once PostgreSQL is back, and ends every stream in time", async () => {
    await platform.blackhole(SCENARIO);
  }, 120_000);
});
