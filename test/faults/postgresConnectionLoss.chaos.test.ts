import { afterAll, beforeAll, describe, it } from "vitest";
import { type ConnectionLossPlatform, type ConnectionLossScenario, startConnectionLossPlatform } from "./postgresConnectionLossScenario.ts";

/**
 * The full-size version of postgresConnectionLoss.int.test.ts and postgresBlackhole.int.test.ts (`npm
 * run chaos`): two processes of each role (api, worker, projector), 40 clients, the connections killed
 * five times a second apart, by the server (pg_terminate_backend) and by the network (TCP resets); then
 * PostgreSQL black-holed under 24 streams with the default usage wait (USAGE_WAIT_MS, 10 s): for 8 s
 * (the streams wait for their usage and end once it is recorded), and for 20 s with a worker killed 14 s
 * in (the streams end with their usage before it is recorded; the other worker records the dead one's).
 */
const SCENARIO: ConnectionLossScenario = {
  processesPerRole: 2,
  clients: 40,
  tokens: 40,
  tokenDelayMs: 25,
  kills: 5,
  killEveryMs: 1000,
  warmUpMs: 2000,
  afterMs: 3000,
  endWithinMs: 15_000,
};

let platform: ConnectionLossPlatform;
beforeAll(async () => {
  platform = await startConnectionLossPlatform(SCENARIO);
}, 120_000);
afterAll(async () => {
  await platform?.close();
}, 60_000);

describe("PostgreSQL connections lost repeatedly under load, two processes of every role", () => {
  it("survives repeated pg_terminate_backend of every backend", async () => {
    await platform.run("terminate", SCENARIO);
  }, 180_000);

  it("survives repeated resets of every connection by the network", async () => {
    await platform.run("reset", SCENARIO);
  }, 180_000);

  it("records every usage after PostgreSQL was black-holed 8 s under 24 streams", async () => {
    await platform.blackhole({ streams: 24, beforeMs: 500, outageMs: 8000, duringOutage: 4, endWithinMs: 25_000, settledWithinMs: 20_000 });
  }, 180_000);

  it("records every usage after PostgreSQL was black-holed 20 s, a worker killed meanwhile", async () => {
    await platform.blackhole({
      streams: 24,
      beforeMs: 500,
      outageMs: 20_000,
      duringOutage: 4,
      killWorkerAfterMs: 14_000,
      endWithinMs: 25_000,
      settledWithinMs: 30_000,
    });
  }, 180_000);
});
