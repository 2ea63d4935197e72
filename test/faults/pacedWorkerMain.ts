import { runRoles } from "../../src/runtime/runRoles.ts";
import { startWorker } from "../../workers/startWorker.ts";
import { workerRole } from "../../workers/workerRole.ts";
import { pacedEngine } from "../inference/pacedEngine.ts";

/**
 * The worker role as workers/main.ts runs it, its engines paced (test/inference/pacedEngine.ts): each
 * delta is passed on `process.argv[2]` ms after the previous one, so a reply of the fast built-in model
 * streams long enough for a fault test to kill the process mid-reply.
 */
const delayMs = Number(process.argv[2] ?? "0");
runRoles([{ ...workerRole, start: (context) => startWorker(context, { wrapEngine: (_model, engine) => pacedEngine(engine, delayMs) }) }]);
