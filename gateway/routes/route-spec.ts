import type { ZodType } from "zod";

/**
 * A route as data: what the OpenAPI document is generated from, and what
 * the server registers. Handlers live beside it in `<name>.handler.ts`.
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
  headers?: HeaderSpec[];
}

export interface RouteSpec {
  method: "POST";
  path: string;
  operationId: string;
  summary: string;
  description: string;
  security: "api-key" | "pay-signature";
  requestHeaders: HeaderSpec[];
  requestBody: ZodType;
  responses: Record<number, ResponseSpec>;
}
