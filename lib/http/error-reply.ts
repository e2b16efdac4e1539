import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { isCodedError, type CodedError } from "../coded-error.js";
import { HttpErrors } from "./http-errors.js";
import { logFieldsOf } from "./log-fields.js";

/**
 * Turns any thrown value into an answer, in one place per server: a coded
 * error with its status, its `Retry-After` and its body; anything unexpected
 * as the opaque 500, logged once with its cause. The bodies themselves are
 * the wire contract of the server and are handed in (`ErrorBodies`), so this
 * module knows HTTP and our error codes, not any API's shapes.
 */

/** What an error says about itself on the wire. */
export interface ErrorDetail {
  message: string;
  type: string;
  /** Present only where a field or header is to blame. */
  param?: string;
  code: string;
}

export interface ErrorBodies {
  /** The body of a coded error that does not carry a body of its own. */
  coded(detail: ErrorDetail, statusCode: number, request: FastifyRequest): unknown;
  /** The 500 body: fixed, so no detail of the cause leaks. */
  internal: unknown;
}

/** Fastify's own request errors, mapped onto our codes. */
function fromFastify(error: FastifyError, request: FastifyRequest): CodedError | null {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return HttpErrors.bodyTooLarge(request.routeOptions.bodyLimit);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return HttpErrors.unsupportedContentType(error.message);
    // A method that carries a body (QUERY, say) sent without Content-Type:
    // refused before any route is looked at, as a body of no type would be.
    case "FST_ERR_ROUTE_MISSING_CONTENT_TYPE":
      return HttpErrors.unsupportedContentType("none");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return HttpErrors.invalidJson("the body is empty or shorter than its Content-Length");
    default:
      return null;
  }
}

export function replyWithError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  bodies: ErrorBodies,
): FastifyReply {
  const coded = isCodedError(error) ? error : fromFastify(error as FastifyError, request);
  // The client went away (or was cut off for being too slow, and answered
  // already): there is nobody to answer. The socket tells, not the request
  // stream: Node destroys a request's stream as soon as its body is read. A
  // coded refusal (a 499 for a client that hung up while it waited) is still
  // logged as one; anything else was abandoned, not a failure of ours.
  if (reply.raw.headersSent || request.raw.socket?.destroyed === true) {
    if (coded && coded.statusCode !== 500) logRefusal(request, coded);
    else {
      request.log.info(
        { ...logFieldsOf(request), reason: (error as Error)?.message },
        "request abandoned",
      );
    }
    return reply;
  }
  if (!coded || coded.statusCode === 500) {
    request.log.error({ ...logFieldsOf(request), err: error }, "request failed");
    return reply.code(500).send(bodies.internal);
  }
  if (coded.retryAfterSeconds !== undefined) {
    reply.header("retry-after", String(coded.retryAfterSeconds));
  }
  logRefusal(request, coded);
  if (coded.body !== undefined) {
    if (Buffer.isBuffer(coded.body)) reply.type("application/json");
    return reply.code(coded.statusCode).send(coded.body);
  }
  const detail: ErrorDetail = {
    message: coded.message,
    type: coded.type,
    ...(coded.param !== null ? { param: coded.param } : {}),
    code: coded.code,
  };
  return reply.code(coded.statusCode).send(bodies.coded(detail, coded.statusCode, request));
}

function logRefusal(request: FastifyRequest, coded: CodedError): void {
  const fields = {
    ...logFieldsOf(request),
    code: coded.code,
    param: coded.param,
    status: coded.statusCode,
    // Why a caller was not let in (a forged, replayed or unconfigured
    // signature; a bad key): the bodies tell callers nothing of it, so the
    // log must. These messages are fixed text, never the caller's bytes.
    ...(coded.statusCode === 401 ? { reason: coded.message } : {}),
  };
  // A 503 for a dependency that failed says why, for whoever runs the gateway.
  if (coded.statusCode >= 500 && coded.cause !== undefined) {
    request.log.warn({ ...fields, err: coded.cause }, "request refused");
  } else {
    request.log.info(fields, "request refused");
  }
}
