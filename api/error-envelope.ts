import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { replyWithError, type ErrorBodies, type ErrorDetail } from "../lib/http/error-reply.js";
import { failedResponse, responsesErrorSchema } from "./responses-response.js";

/**
 * Error bodies of the Responses API (spec sections 2.4 and 7), shared by the
 * gateway and the runtime: the failed Responses envelope for request errors
 * (400, 413, 420), the ErrorEnvelope for every other status, and the opaque
 * 500. `sendError` is the error edge both servers install.
 */

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The response id of this request, once known (the gateway mints it, the
     * runtime receives it): a failed envelope carries it as its `id`.
     */
    responseId?: string;
  }
}

export const errorEnvelopeSchema = z
  .object({ error: responsesErrorSchema })
  .describe("ErrorEnvelope");

export const internalErrorSchema = z
  .object({
    error: z.object({ type: z.literal("internal_error"), message: z.literal("Internal error") }),
  })
  .describe("The opaque 500 body: no detail is leaked");

export const INTERNAL_ERROR_BODY = {
  error: { type: "internal_error", message: "Internal error" },
} as const;

/** Statuses whose body is the failed Responses envelope (spec section 7). */
export const FAILED_ENVELOPE_STATUSES: ReadonlySet<number> = new Set([400, 413, 420]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The body of a coded error: the failed envelope (echoing the request) or the ErrorEnvelope. */
export function errorBody(
  detail: ErrorDetail,
  statusCode: number,
  requestBody: unknown,
  createdAtSeconds: number,
  responseId?: string,
): unknown {
  if (!FAILED_ENVELOPE_STATUSES.has(statusCode)) return { error: detail };
  return failedResponse(
    isRecord(requestBody) ? requestBody : {},
    detail,
    createdAtSeconds,
    responseId,
  );
}

/** The error edge of a server of this API: `app.setErrorHandler((e, q, r) => sendError(e, q, r, now))`. */
export function sendError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  now: () => number,
  options: { envelopeOnly?: boolean } = {},
): FastifyReply {
  const bodies: ErrorBodies = {
    coded: (detail, statusCode, req) =>
      options.envelopeOnly
        ? { error: detail }
        : errorBody(detail, statusCode, req.body, Math.floor(now() / 1000), req.responseId),
    internal: INTERNAL_ERROR_BODY,
  };
  return replyWithError(error, request, reply, bodies);
}
