import type { z } from "zod";
import type { ModelCapability } from "../../../../models/modelCapabilities.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import { unsupportedParameter } from "./resolveModel.ts";

/**
 * What the platform does with an OpenAI request parameter (docs/compatibility.md): honoured, accepted and
 * deliberately ignored (it changes nothing a client gets back), or refused when set (a 400).
 */
export type ParameterPolicy = "honoured" | "ignored" | "refused";

/** One request parameter of an endpoint: its schema, its policy and what a model needs to take it. */
export type RequestParameter<Body = never> = {
  schema: z.ZodType;
  policy: ParameterPolicy;
  /** The capability a model needs for it beyond the endpoint's own; without one, every model of the endpoint takes it. */
  capability?: ModelCapability;
  /**
   * With a capability: whether this request uses the parameter (a model without the capability then gets
   * a 400 naming it) and how the 400 says what is not supported (default: the parameter's name).
   */
  uses?: (body: Body) => boolean;
  unsupported?: (body: Body) => string;
  /** The `param` of that 400 (default: the parameter's name), e.g. the field inside it that needs the capability. */
  param?: string;
  /**
   * Whether the models API's `supported_parameters` lists it for a model (default: a parameter the policy
   * honours). The model and the prompt (messages, prompt, input) are never listed.
   */
  listed?: boolean | ((model: RegisteredModel) => boolean);
};

/** An endpoint's parameters, in the order of its request schema (and of its capability checks). */
export type ParameterTable<Body = never> = Readonly<Record<string, RequestParameter<Body>>>;

/** The zod shape of a request schema: one field per parameter, in the table's order. */
export function schemaShape<T extends ParameterTable<never>>(table: T): { [K in keyof T]: T[K]["schema"] } {
  return Object.fromEntries(Object.entries(table).map(([name, parameter]) => [name, parameter.schema])) as { [K in keyof T]: T[K]["schema"] };
}

/** 400 naming the first parameter of the request that needs a capability the model lacks (the table's order). */
export function assertModelTakes<Body>(table: ParameterTable<Body>, body: Body, model: RegisteredModel): void {
  for (const name in table) {
    const parameter = table[name]!;
    if (!parameter.capability || model.capabilities[parameter.capability] || !parameter.uses?.(body)) continue;
    throw unsupportedParameter(model, parameter.param ?? name, parameter.unsupported?.(body) ?? name);
  }
}

/** The parameters of the table that `supported_parameters` lists for the model, with the capability each needs (or none). */
export function listedParameters(table: ParameterTable<never>, model: RegisteredModel): { name: string; capability: ModelCapability | undefined }[] {
  return Object.entries(table)
    .filter(([, parameter]) => {
      const listed = parameter.listed ?? parameter.policy === "honoured";
      return typeof listed === "function" ? listed(model) : listed;
    })
    .map(([name, parameter]) => ({ name, capability: parameter.capability }));
}
