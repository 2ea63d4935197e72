import { runRoles } from "../runtime/runRoles.ts";
import { apiRole } from "./apiRole.ts";

/** The API role alone: `npm run start:api` (`node src/api/main.ts`). */
runRoles([apiRole]);
