import { z } from "zod";
import { errorEnvelopeSchema } from "../../api/error-envelope.js";
import { PAY_USAGE_HEADER } from "../pay/pay-usage.js";
import {
  INFERENCE_TYPE,
  RATE_LIMIT_HEADERS,
  REQUEST_ID,
  sharedErrors,
  success,
} from "./common-responses.js";
import type { HeaderSpec, RouteSpec } from "./route-spec.js";
import { storedResponseLinks } from "./stored-responses.route.js";

const PAY_USAGE: HeaderSpec = {
  name: PAY_USAGE_HEADER,
  // On every 200 but a stream's, whose usage is known only at its end.
  required: false,
  description:
    'Usage settled with the payment provider, an RFC 8941 dictionary: `slug="<service slug>", input_tokens=<n>, output_tokens=<n>`. On a stream (`stream: true`) it is an HTTP trailer instead, announced with `Trailer: pay-usage`, and the terminal event\'s response repeats it as `pay_usage`.',
};

/** POST /pay/v1/responses: the payment-signature route (spec 4.2, 5.2). */
export const payResponsesRoute: RouteSpec = {
  method: "POST",
  action: "infer",
  path: "/pay/v1/responses",
  operationId: "createPaidResponse",
  summary: "Run a model (payment signature)",
  description:
    "The same body and routing as /v1/responses, authenticated only by `pay-signature`, each signature accepted once. An allowance check with the payment provider runs before any inference; actual usage is settled with the provider and reported in `pay-usage`.",
  config: {
    auth: "pay-signature",
    rateLimit: "pay-signer",
    metering: "settlement",
    modelRoute: "pay",
    metricsName: "pay",
  },
  requestHeaders: [
    {
      name: "pay-signature",
      required: true,
      description:
        "`t=<unix-seconds>,kid=<key-id>,v1=<hex HMAC-SHA256 of the raw body>`; several v1 values may be sent, or `v2=<hex HMAC-SHA256 of <t>.<raw body>>`. Accepted once.",
    },
    {
      name: "pay-request-id",
      required: false,
      description: "The payment provider's request id, logged and sent back to it for correlation.",
    },
    {
      name: "pay-agent-id",
      required: false,
      description:
        "The buying agent, named to the provider and in logs. Unsigned, so it decides no charge and no limit: the provider attributes by the signature it issued, and the rate limit is the signing `kid`'s.",
    },
    REQUEST_ID,
  ],
  responses: {
    200: {
      ...success,
      headers: [REQUEST_ID, INFERENCE_TYPE, PAY_USAGE, ...RATE_LIMIT_HEADERS],
      links: storedResponseLinks(true),
    },
    ...sharedErrors,
    401: {
      description:
        "Missing, invalid or already used pay-signature, or no payment provider configured",
      schema: z.object({ error: z.literal("invalid_pay_signature") }),
      headers: [REQUEST_ID],
    },
    402: {
      description:
        "Allowance denied by the payment provider (its body, passed through), or a signature timestamp outside the tolerance",
      schema: z.union([z.record(z.string(), z.unknown()), errorEnvelopeSchema]),
      headers: [REQUEST_ID],
    },
  },
};
