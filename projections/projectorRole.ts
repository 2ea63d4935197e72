import type { RoleDefinition } from "../src/runtime/role.ts";
import { startProjector } from "./startProjector.ts";

/** The projector role: builds the read models from the log and sweeps orphaned budget holds. Needs only PostgreSQL. */
export const projectorRole: RoleDefinition = { name: "projector", start: startProjector, needsRedis: false, poolUse: "background" };
