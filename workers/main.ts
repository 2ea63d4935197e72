import { runRoles } from "../src/runtime/runRoles.ts";
import { workerRole } from "./workerRole.ts";

/** The worker role alone: `npm run start:worker` (`node workers/main.ts`). Loads no API code. */
runRoles([workerRole]);
