import { afterAll, beforeAll, describe, it } from "vitest";
import { type BlackholeScenario, type ConnectionLossPlatform, startConnectionLossPlatform } from "./postgresConnectionLossScenario.ts";

/**
 * PostgreSQL black-holed (packets dropped, nothing refused or closed) for 8 s while streamed chats
 * finish, every role (api, two workers, projector) a process of its own behind a TCP proxy: longer
 * than any quick retry, so each finished job's usage can only be recorded once PostgreSQL is back.
 * Clients wait for their usage 2 s (USAGE_WAIT_MS), so their streams end, with their usage chunk,
 * during the outage; one worker is then killed (kill -9) while its jobs' usage is still unrecorded.
 *
 * No other process dies; every stream delivers its whole reply and its usage and ends within a
 * bound; every reply is charged exactly once within seconds of PostgreSQL's return (the killed
 * worker's by the other worker), as its usage chunk showed; no budget hold is left open. The
 * full-size versions (default wait, longer outage) are in postgresConnectionLoss.chaos.test.ts.
 */
const SCENARIO: BlackholeScenario = {
  streams: 6,
  beforeMs: 700,
  outageMs: 8000,
  duringOutage: 2,
  killWorkerAfterMs: 5000,
  endWithinMs: 15_000,
  settledWithinMs: 20_000,
};

let platform: ConnectionLossPlatform;
beforeAll(async () => {
  platform = await startConnectionLossPlatform({ processesPerRole: 1, workers: 2, tokens: 40, tokenDelayMs: 40, env: { USAGE_WAIT_MS: "2000" } });
}, 120_000);
afterAll(async () => {
  await platform?.close();
}, 60_000);

describe("PostgreSQL black-holed while generations finish, every role a process of its own", () => {
  it("records every delivered reply's usage once PostgreSQL is back, even from a worker killed meanwhile, and ends every stream in time", async () => {
    await platform.blackhole(SCENARIO);
  }, 120_000);
});
