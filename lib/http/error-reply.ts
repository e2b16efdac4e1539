import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { failedResponse } from "../../api/responses-response.js";
import { isCodedError, type CodedError } from "../coded-error.js";
import { HttpErrors } from "./http-errors.js";
import { logFieldsOf } from "./log-fields.js";

/**
 * Turns any thrown value into the spec's answer, in one place (spec section
 * 7). Request errors (400, 413, 420) get the failed Responses envelope;
 * overload and availability errors get the ErrorEnvelope with Retry-After;
 * anything unexpected is the opaque 500, logged once with its cause.
 */

/** Fastify's own request errors, mapped onto our codes. */
function fromFastify(error: FastifyError, request: FastifyRequest): CodedError | null {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return HttpErrors.bodyTooLarge(request.routeOptions.bodyLimit);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return HttpErrors.unsupportedContentType(error.message);
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return HttpErrors.invalidJson("the body is empty or shorter than its Content-Length");
    default:
      return null;
  }
}

export const INTERNAL_ERROR_BODY = {
  error: { type: "internal_error", message: "Internal error" },
} as const;

/** Statuses whose body is the failed Responses envelope (spec section 7). */
const ENVELOPE_STATUSES = new Set([400, 413, 420]);

export function sendError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  now: () => number,
): FastifyReply {
  const coded = isCodedError(error) ? error : fromFastify(error as FastifyError, request);
  if (!coded || coded.statusCode === 500) {
    request.log.error({ ...logFieldsOf(request), err: error }, "request failed");
    return reply.code(500).send(INTERNAL_ERROR_BODY);
  }
  if (coded.retryAfterSeconds !== undefined) {
    reply.header("retry-after", String(coded.retryAfterSeconds));
  }
  request.log.info(
    { ...logFieldsOf(request), code: coded.code, param: coded.param, status: coded.statusCode },
    "request refused",
  );
  if (coded.body !== undefined) {
    if (Buffer.isBuffer(coded.body)) reply.type("application/json");
    return reply.code(coded.statusCode).send(coded.body);
  }
  // `param` only where a field is to blame: the spec types it as a string.
  const detail = {
    message: coded.message,
    type: coded.type,
    ...(coded.param !== null ? { param: coded.param } : {}),
    code: coded.code,
  };
  if (!ENVELOPE_STATUSES.has(coded.statusCode)) {
    return reply.code(coded.statusCode).send({ error: detail });
  }
  const body = isRecord(request.body) ? (request.body as Record<string, unknown>) : {};
  return reply.code(coded.statusCode).send(failedResponse(body, detail, Math.floor(now() / 1000)));
}

function isRecord(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
