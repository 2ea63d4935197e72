import { InvalidRequestError } from "../../http/errors.ts";
import { jsonSchemaProblem, type JsonSchemaValidator } from "./jsonSchemaProblem.ts";

type SchemaCarrier = {
  tools?: ReadonlyArray<{ function: { parameters?: Record<string, unknown> | undefined } }> | null;
  response_format?: { type: string; json_schema?: { schema?: Record<string, unknown> | undefined } } | null;
};

/**
 * Validates every JSON Schema of a chat request (each tool's parameters, the json_schema response
 * format) with jsonSchemaProblem: the first bad one is a 400 naming its parameter, before any admission
 * or enqueue.
 */
export function checkRequestSchemas(body: SchemaCarrier, compiler: JsonSchemaValidator): void {
  for (const [index, tool] of (body.tools ?? []).entries()) {
    if (tool.function.parameters !== undefined) refuse(`tools[${index}].function.parameters`, jsonSchemaProblem(tool.function.parameters, compiler));
  }
  const schema = body.response_format?.json_schema?.schema;
  if (schema !== undefined) refuse("response_format.json_schema.schema", jsonSchemaProblem(schema, compiler));
}

function refuse(param: string, problem: string | null): void {
  if (problem !== null) throw new InvalidRequestError(`Invalid '${param}': ${problem}`, { param, code: "invalid_value" });
}
