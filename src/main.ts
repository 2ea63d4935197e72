import { parseArgs } from "node:util";
import { apiRole } from "./api/apiRole.ts";
import { ConfigError } from "./config/config.ts";
import type { RoleDefinition } from "./runtime/role.ts";
import { runRoles } from "./runtime/runRoles.ts";
import { projectorRole } from "../projections/projectorRole.ts";
import { workerRole } from "../workers/workerRole.ts";

/**
 * The launcher of `npm start`: every role in one process, for one machine with the embedded default
 * model. The only module that imports all three roles. `--role NAME` (repeatable) starts only those;
 * in production run each role from its own entry point (`npm run start:api|start:worker|start:projector`).
 * Its Prometheus metrics are on METRICS_PORT, 9464 unless set (never on the API's public port unless
 * METRICS_ON_API_PORT=true).
 */
const ROLES: RoleDefinition[] = [apiRole, workerRole, projectorRole];

const { values } = parseArgs({ options: { role: { type: "string", multiple: true } } });
const names = values.role ?? ROLES.map((r) => r.name);
const unknown = names.filter((name) => !ROLES.some((r) => r.name === name));
if (unknown.length) {
  process.stderr.write(`${new ConfigError(`unknown --role "${unknown.join(", ")}" (expected one of ${ROLES.map((r) => r.name).join(", ")})`).message}\n`);
  process.exit(1);
}
runRoles(
  ROLES.filter((r) => names.includes(r.name)),
  { METRICS_PORT: "9464" },
);
