import { runRoles } from "../src/runtime/runRoles.ts";
import { projectorRole } from "./projectorRole.ts";

/** The projector role alone: `npm run start:projector` (`node projections/main.ts`). Needs only PostgreSQL. */
runRoles([projectorRole]);
