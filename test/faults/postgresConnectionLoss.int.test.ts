import { afterAll, beforeAll, describe, it } from "vitest";
import { type ConnectionLossPlatform, type ConnectionLossScenario, startConnectionLossPlatform } from "./postgresConnectionLossScenario.ts";

/**
 * PostgreSQL connections killed under a little load, one process of each role (api, worker, projector):
 * by the server (pg_terminate_backend) and by the network (TCP resets). No process dies; every request
 * ends within seconds (a reply, a 503 or an error event); the roles serve afterwards; nothing is
 * charged twice and no budget hold stays open. The full-size version: postgresConnectionLoss.chaos.test.ts.
 */
const SCENARIO: ConnectionLossScenario = {
  processesPerRole: 1,
  clients: 6,
  tokens: 16,
  tokenDelayMs: 25,
  kills: 2,
  killEveryMs: 700,
  warmUpMs: 1000,
  afterMs: 1500,
  endWithinMs: 10_000,
};

let platform: ConnectionLossPlatform;
beforeAll(async () => {
  platform = await startConnectionLossPlatform(SCENARIO);
}, 120_000);
afterAll(async () => {
  await platform?.close();
}, 60_000);

describe("PostgreSQL connections lost under load, every role a process of its own", () => {
  it("survives pg_terminate_backend of every backend", async () => {
    await platform.run("terminate", SCENARIO);
  }, 120_000);

  it("survives every connection reset by the network", async () => {
    await platform.run("reset", SCENARIO);
  }, 120_000);
});
