/**
 * What the API must know about how a kind of engine serves a model. The API never sees an engine (the
 * workers run them); it asks a model's traits, never its `engine.type`, so these rows are the only
 * place outside workers/engines/ that distinguishes engine kinds. A new kind of engine adds its config
 * schema (modelRegistrySchema.ts, whose `type` must be an EngineKind) and its row here.
 */
export type EngineTraits = {
  /**
   * Output is held to a JSON Schema (a json_schema response format, a forced tool call) by a grammar
   * built from the schema and by nothing else: a `strict` schema using a keyword the grammar does not
   * enforce is refused before it runs (src/contracts/schemaGrammarSupport.ts).
   */
  grammarEnforcedSchemas: boolean;
  /**
   * A reasoning model whose client set no token bound is sent none: the backend's own default applies
   * (admission then holds for the context length). Otherwise the API's default bound applies.
   */
  backendDefaultMaxTokens: boolean;
  /** The backend-specific request parameters (`extra_parameters`) the registry may name: these, or any name. */
  extraParameters: readonly string[] | "any";
};

/** The backend-specific parameters the embedded engine honours (node-llama-cpp sampling options). */
export const EMBEDDED_EXTRA_PARAMETERS: readonly string[] = ["top_k", "min_p", "repetition_penalty"];

export const ENGINE_TRAITS = {
  embedded: { grammarEnforcedSchemas: true, backendDefaultMaxTokens: false, extraParameters: EMBEDDED_EXTRA_PARAMETERS },
  upstream: { grammarEnforcedSchemas: false, backendDefaultMaxTokens: true, extraParameters: "any" },
} as const satisfies Record<string, EngineTraits>;

/** The kinds of engine a registry entry can name (`engine.type`). */
export type EngineKind = keyof typeof ENGINE_TRAITS;

/** The traits of the engine serving a model. */
export function engineTraits(model: { engine: { type: EngineKind } }): EngineTraits {
  return ENGINE_TRAITS[model.engine.type];
}
