import type { ZodType } from "zod";
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
}

/** A path parameter (`:name` in `path`, `{name}` in the document). */
export interface ParamSpec {
  name: string;
  description: string;
  schema: ZodType;
}

export interface RouteSpec {
  method: "POST" | "GET" | "DELETE";
  path: string;
  operationId: string;
  summary: string;
  description: string;
  config: GatewayRouteConfig;
  requestHeaders: HeaderSpec[];
  pathParams?: ParamSpec[];
  /** The query string's parameters: a zod object whose fields are strings on the wire. */
  query?: ZodType;
  /** The body of a route that serves no model (a model route's comes from the registry). */
  body?: { mediaType: "application/json" | "multipart/form-data"; schema: ZodType };
  responses: Record<number, ResponseSpec>;
}
