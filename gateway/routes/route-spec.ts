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
}

export interface RouteSpec {
  method: "POST" | "GET";
  path: string;
  operationId: string;
  summary: string;
  description: string;
  config: GatewayRouteConfig;
  /** Which handler serves it; default the model routes' (forward to a runtime). */
  handler?: "completionsUsage" | "costs";
  /** The query parameters, as typed values (api/usage.ts brings the query string to them). */
  query?: ZodObject;
  requestHeaders: HeaderSpec[];
  responses: Record<number, ResponseSpec>;
}
