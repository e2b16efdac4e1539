import type { FastifyRequest } from "fastify";

declare module "fastify" {
  interface FastifyRequest {
    /**
     * Who is calling, once a route knows (an API key's id and account): added
     * to the request's completion line and to its error lines. Cheaper than a
     * child logger per request, which serializes its bindings each time.
     */
    logFields?: Readonly<Record<string, string>>;
  }
}

/** The caller's fields for a log line of this request; empty before they are known. */
export function logFieldsOf(request: FastifyRequest): Readonly<Record<string, string>> {
  return request.logFields ?? NONE;
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});
