import type { ZodObject, ZodType } from "zod";
import type { GatewayRouteConfig } from "./route-config.js";

/**
 * A route as data: what the server registers (method, path, `config`, a
 * body validated by the route) and what the OpenAPI document is generated
 * from (headers, responses, and the body's per-task request schemas).
 */
export interface HeaderSpec {
  name: string;
  required: boolean;
  description: string;
}

export interface ResponseSpec {
  description: string;
  /** Absent for bodies the spec leaves free-form. */
  schema?: ZodType;
  /** The events of a `text/event-stream` answer (`stream: true`), when the route streams. */
  eventStream?: ZodType;
  headers?: HeaderSpec[];
  /** OpenAPI links: the operations this answer's ids feed (a stateful fuzzer follows them). */
  links?: Record<string, LinkSpec>;
}

/**
 * An OpenAPI link: `parameters` maps a path parameter to a runtime
 * expression; `requestBody` gives body fields the same way.
 */
export interface LinkSpec {
  operationId: string;
  description: string;
  parameters?: Record<string, string>;
  requestBody?: Record<string, string>;
}

/** Links from an answer whose body's `id` is the `param` of each operation. */
export function linksById(
  param: string,
  operations: Record<string, { operationId: string; description: string }>,
): Record<string, LinkSpec> {
  return Object.fromEntries(
    Object.entries(operations).map(([name, { operationId, description }]) => [
      name,
      { operationId, description, parameters: { [param]: "$response.body#/id" } },
    ]),
  );
}

/**
 * What a route does, which picks its handler. `files-and-batches`: a Files
 * or Batch route, served by its handler of the same `operationId` in the
 * scope that reads multipart forms (gateway/batch/).
 */
export type RouteAction =
  | "infer"
  | "retrieve"
  | "delete"
  | "cancel"
  | "list-input-items"
  | "usage-completions"
  | "usage-costs"
  | "list-models"
  | "retrieve-model"
  | "files-and-batches";

/** A path parameter (`{name}` in `path`). */
export interface ParamSpec {
  name: string;
  description: string;
  schema: ZodType;
}

export interface RouteSpec {
  method: "POST" | "GET" | "DELETE";
  /** As OpenAPI writes it: `{name}` for a path parameter. */
  path: string;
  action: RouteAction;
  /** Path parameters, for the document; each `{name}` of the path. */
  pathParams?: ParamSpec[];
  /** The query string's parameters, for the document (the handler validates them). */
  query?: ZodObject;
  operationId: string;
  summary: string;
  description: string;
  config: GatewayRouteConfig;
  requestHeaders: HeaderSpec[];
  /** The body of a route that serves no model (a model route's comes from the registry). */
  body?: { mediaType: "application/json" | "multipart/form-data"; schema: ZodType };
  responses: Record<number, ResponseSpec>;
}
