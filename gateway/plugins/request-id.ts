import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RawRequestDefaultExpression,
} from "fastify";
import { newId } from "../../api/responses-response.js";
import { randomHex } from "../../lib/random-hex.js";

/**
 * Two ids per request. `x-request-id` is the caller's correlation id: theirs
 * when it is a sane token, else a new one, on every response and log line.
 * It is chosen by the caller, so it decides nothing: usage records and
 * settlements are keyed by the response id, which the gateway mints.
 *
 * A caller's id goes into logs, so anything that could forge a log line
 * (newlines, control characters, very long values) is replaced rather than
 * echoed.
 */
const SAFE_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export function newRequestId(): string {
  return `req_${randomHex(16)}`;
}

export function requestIdFrom(request: RawRequestDefaultExpression): string {
  const given = request.headers["x-request-id"];
  return typeof given === "string" && SAFE_ID.test(given) ? given : newRequestId();
}

/**
 * The request's response id (`resp_…`), minted the first time anything needs
 * it: the runtime makes it the Responses object's `id`, metering keys the
 * record by it, a failed envelope carries it.
 */
export function responseIdOf(request: FastifyRequest): string {
  request.responseId ??= newId("resp");
  return request.responseId;
}

export function requestIdHooks(app: FastifyInstance): void {
  app.decorateRequest("responseId", undefined);
}

/**
 * The first step of every request (app.ts runs it in the one `onRequest`
 * hook of the whole app): `x-request-id` on the raw response, so that a 408
 * written by the HTTP server for a request too slow to arrive
 * (slow-clients.ts) carries it too.
 */
export function stampRequestId(request: FastifyRequest, reply: FastifyReply): void {
  reply.raw.setHeader("x-request-id", request.id);
}
