import type Router from "@koa/router";
import type { ModelCapability } from "../../../../models/modelCapabilities.ts";
import type { AppDeps } from "../../../appDeps.ts";
import type { ParameterTable } from "./requestParameters.ts";

/**
 * One family of inference endpoints (chat completions, text completions, embeddings, responses): its
 * routes, and for a family a model serves by a capability, that capability and its parameter table (the
 * models API lists a model's `supported_parameters` from the tables of the families it serves).
 */
export type EndpointFamily = {
  name: string;
  routes(router: Router, deps: AppDeps): void;
  served?: { capability: ModelCapability; parameters: ParameterTable };
};
