import { z } from "zod";
import { errorEnvelopeSchema, internalErrorSchema } from "../../api/error-envelope.js";
import { responsesResponseSchema } from "../../api/responses-response.js";
import { streamEventSchema } from "../../api/stream-events.js";
import type { HeaderSpec, ResponseSpec } from "./route-spec.js";

/** Responses and headers both model routes share (spec sections 4 and 7). */
export const REQUEST_ID: HeaderSpec = {
  name: "x-request-id",
  required: false,
  description:
    "Correlation id: the caller's when sent (1-128 of A-Z a-z 0-9 . _ : @ -), else a new one. On every response. It is for correlation only: nothing is keyed or billed by it.",
};

export const INFERENCE_TYPE: HeaderSpec = {
  name: "x-inference-type",
  required: false,
  description: "Where inference ran: `cloud` when a runtime of the platform answered.",
};

export const RETRY_AFTER: HeaderSpec = {
  name: "retry-after",
  required: true,
  description: "Seconds to wait before retrying.",
};

/**
 * The OpenAI API's rate-limit headers (docs/api-keys.md): on answers and
 * 429s of a rate-limited caller; the `-tokens` ones only when a token limit
 * applies.
 */
export const RATE_LIMIT_HEADERS: HeaderSpec[] = (["requests", "tokens"] as const).flatMap(
  (unit) => [
    {
      name: `x-ratelimit-limit-${unit}`,
      required: false,
      description: `The ${unit} the caller's bucket holds when full.`,
    },
    {
      name: `x-ratelimit-remaining-${unit}`,
      required: false,
      description: `The ${unit} left in the caller's bucket after this request.`,
    },
    {
      name: `x-ratelimit-reset-${unit}`,
      required: false,
      description: `How long until the bucket is full again, as a duration (\`1s\`, \`250ms\`, \`6m0s\`).`,
    },
  ],
);

export const classifierResultSchema = z
  .record(z.string(), z.number().min(0).max(1))
  .describe("Zero-shot classifier result: one independent confidence score per candidate label");

export const success: ResponseSpec = {
  description:
    "A Responses object (general models) or the label-to-score object (zero-shot classifiers). With `stream: true` (text generation only), `text/event-stream`: the Responses API's semantic events, each an `event:` line naming its type and a `data:` line holding it as JSON, ending with exactly one of response.completed, response.incomplete or response.failed, which carries the whole response with its usage (docs/streaming.md)",
  schema: z.union([responsesResponseSchema, classifierResultSchema]),
  eventStream: streamEventSchema.describe("One event of the stream (the data line of a frame)"),
  headers: [REQUEST_ID, INFERENCE_TYPE, ...RATE_LIMIT_HEADERS],
};

const failedEnvelope = (description: string): ResponseSpec => ({
  description,
  schema: responsesResponseSchema,
  headers: [REQUEST_ID],
});

/** An ErrorEnvelope answer (spec 2.4): the request id, then any other headers. */
export const envelope = (description: string, extra: HeaderSpec[] = []): ResponseSpec => ({
  description,
  schema: errorEnvelopeSchema,
  headers: [REQUEST_ID, ...extra],
});

/**
 * The errors every API-key read answers alike (the usage and models routes):
 * the key, the request timeout, its rate limit, the opaque 500. Each route
 * adds its own 400, 403, 404 or 503.
 */
export const keyReadErrors: Record<number, ResponseSpec> = {
  401: envelope("Missing, malformed, unknown or revoked API key"),
  408: envelope("The request was not received in full within the gateway's request timeout"),
  429: envelope("Rate limited", [RETRY_AFTER, ...RATE_LIMIT_HEADERS]),
  500: {
    description: "Unexpected server error",
    schema: internalErrorSchema,
    headers: [REQUEST_ID],
  },
};

/** The API-key routes' credential (spec 5.1), with the OpenAI clients' alias. */
export const API_KEY_HEADER: HeaderSpec = {
  name: "x-api-key",
  required: true,
  description: "The caller's API key. `Authorization: Bearer <key>` is accepted as an alias.",
};

/** Rows of spec section 7 that both routes answer the same way. */
export const sharedErrors: Record<number, ResponseSpec> = {
  400: failedEnvelope(
    "Malformed JSON, wrong Content-Type, an unknown model, or a missing or invalid field (failed Responses envelope; `error.param` names the field)",
  ),
  408: envelope(
    "The runtime did not answer within the model's timeout (30 s by default), or the request was not received in full within the gateway's request timeout",
  ),
  404: envelope(
    "`previous_response_id` names no stored response of the caller's: never made, another caller's, deleted, expired or made with `store: false`, all alike (`response_not_found`, `param: previous_response_id`)",
  ),
  413: failedEnvelope("The request body is over the size limit"),
  420: failedEnvelope(
    "Input tokens exceed the model's maxTokens and the model errors instead of truncating",
  ),
  429: envelope("Rate limited, or the model's queue is full", [RETRY_AFTER, ...RATE_LIMIT_HEADERS]),
  500: {
    description: "Unexpected server error",
    schema: internalErrorSchema,
    headers: [REQUEST_ID],
  },
  502: envelope("No runtime accepted the connection, or the runtime failed"),
  503: envelope("The model has no ready runtime yet", [RETRY_AFTER]),
};
