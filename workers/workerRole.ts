import type { RoleDefinition } from "../src/runtime/role.ts";
import { startWorker } from "./startWorker.ts";

/** The worker role: consumes the model queues and runs inference through the engine adapters. */
export const workerRole: RoleDefinition = { name: "worker", start: (context) => startWorker(context), needsRedis: true, poolUse: "background" };
