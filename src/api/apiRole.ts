import type { RoleDefinition } from "../runtime/role.ts";
import { startApi } from "./startApi.ts";

/** The API role: HTTP (Koa), auth, validation, admission, enqueue and the SSE relay. */
export const apiRole: RoleDefinition = { name: "api", start: startApi, needsRedis: true, poolUse: "api" };
