import type { RoleDefinition } from "../src/runtime/role.ts";
import { startProjector } from "./startProjector.ts";

/**
 * The projector role: builds the read models from the log and sweeps orphaned budget holds. Needs
 * PostgreSQL; Redis only to tell whether an old hold's job is still queued or running (without it, such
 * holds are kept), so it is not required at start-up.
 */
export const projectorRole: RoleDefinition = { name: "projector", start: startProjector, needsRedis: false, poolUse: "background" };
