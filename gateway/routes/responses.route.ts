import { errorEnvelopeSchema } from "../../api/error-envelope.js";
import { API_KEY_HEADER, REQUEST_ID, sharedErrors, success } from "./common-responses.js";
import type { RouteSpec } from "./route-spec.js";
import { storedResponseLinks } from "./stored-responses.route.js";

/** POST /v1/responses: the API-key route (spec 4.1, 5.1). */
export const responsesRoute: RouteSpec = {
  method: "POST",
  action: "infer",
  path: "/v1/responses",
  operationId: "createResponse",
  summary: "Run a model (API key)",
  description:
    "Runs inference for `model` and returns a Responses object, or the label-to-score object for a zero-shot classifier. Billed to the key's account (subscription metering).",
  config: {
    auth: "api-key",
    rateLimit: "api-key",
    metering: "usage",
    modelRoute: "api-key",
    metricsName: "api-key",
  },
  requestHeaders: [
    API_KEY_HEADER,
    {
      name: "x-project-id",
      required: false,
      description: "A project of the key's account that the request is scoped to.",
    },
    REQUEST_ID,
  ],
  responses: {
    200: { ...success, links: storedResponseLinks(false) },
    ...sharedErrors,
    401: {
      description: "Missing, malformed, unknown or revoked API key",
      schema: errorEnvelopeSchema,
      headers: [REQUEST_ID],
    },
    403: {
      description: "The key's account may not use the project in x-project-id",
      schema: errorEnvelopeSchema,
      headers: [REQUEST_ID],
    },
  },
};
