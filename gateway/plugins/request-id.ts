import { randomHex } from "../../lib/random-hex.js";
import type { FastifyInstance, RawRequestDefaultExpression } from "fastify";

/**
 * Every response carries `x-request-id`: the caller's, when it is a sane
 * token, or a new one. A caller's id goes into logs, so anything that could
 * forge a log line (newlines, control characters, very long values) is
 * replaced rather than echoed.
 */
const SAFE_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export function newRequestId(): string {
  return `req_${randomHex(16)}`;
}

export function requestIdFrom(request: RawRequestDefaultExpression): string {
  const given = request.headers["x-request-id"];
  return typeof given === "string" && SAFE_ID.test(given) ? given : newRequestId();
}

export function echoRequestId(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    done();
  });
}
