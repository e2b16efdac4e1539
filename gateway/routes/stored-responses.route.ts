import { z } from "zod";
import { errorEnvelopeSchema, internalErrorSchema } from "../../api/error-envelope.js";
import { responsesResponseSchema } from "../../api/responses-response.js";
import {
  deletedResponseSchema,
  inputItemListSchema,
  inputItemsQuerySchema,
  retrieveQuerySchema,
  responseIdParamSchema,
} from "../../api/stored-responses.js";
import { API_KEY_HEADER, RATE_LIMIT_HEADERS, REQUEST_ID, RETRY_AFTER } from "./common-responses.js";
import type { GatewayRouteConfig } from "./route-config.js";
import {
  linksById,
  type HeaderSpec,
  type LinkSpec,
  type ResponseSpec,
  type RouteAction,
  type RouteSpec,
} from "./route-spec.js";

/**
 * `GET` and `DELETE /v1/responses/{response_id}`,
 * `GET /v1/responses/{response_id}/input_items` and
 * `POST /v1/responses/{response_id}/cancel`, as the OpenAI API has them,
 * on the API-key route and under `/pay` on the payment route. A response
 * that is not the caller's is a 404 whatever the reason (docs/stored-responses.md).
 */
const API_KEY: GatewayRouteConfig = {
  auth: "api-key",
  rateLimit: "api-key",
  metering: "none",
  modelRoute: null,
  metricsName: "api-key-stored",
  // A read makes no response, so a refused one has none to echo (as usage's).
  errorBody: "envelope",
};

const PAY: GatewayRouteConfig = {
  auth: "pay-signature",
  rateLimit: "pay-signer",
  metering: "none",
  modelRoute: null,
  metricsName: "pay-stored",
  errorBody: "envelope",
};

const API_KEY_HEADERS: HeaderSpec[] = [
  API_KEY_HEADER,
  {
    name: "x-project-id",
    required: false,
    description:
      "The project the response was made in: a response made with a project is found only with it, one made without only without.",
  },
  REQUEST_ID,
];

const PAY_HEADERS: HeaderSpec[] = [
  {
    name: "pay-signature",
    required: true,
    description:
      "Issued by the payment provider under the `kid` that signed the request that made the response, over the request target instead of a body: `v1` is HMAC-SHA256 of `<METHOD> <path and query>` (for example `GET /pay/v1/responses/resp_…`), `v2` of `<t>.<METHOD> <path and query>`.",
  },
  {
    name: "pay-agent-id",
    required: false,
    description: "The buying agent, for logs only: unsigned, it decides no access and no limit.",
  },
  REQUEST_ID,
];

const notFound: ResponseSpec = {
  description:
    "No response with this id is the caller's: it never existed, is another caller's, was deleted, has expired, or was made with `store: false`; all answer alike",
  schema: errorEnvelopeSchema,
  headers: [REQUEST_ID],
};

function errorsOf(paid: boolean): Record<number, ResponseSpec> {
  return {
    401: paid
      ? {
          description: "Missing or invalid pay-signature, or no payment provider configured",
          schema: z.object({ error: z.literal("invalid_pay_signature") }),
          headers: [REQUEST_ID],
        }
      : {
          description: "Missing, malformed, unknown or revoked API key",
          schema: errorEnvelopeSchema,
          headers: [REQUEST_ID],
        },
    ...(paid
      ? {
          402: {
            description: "A signature timestamp outside the tolerance",
            schema: errorEnvelopeSchema,
            headers: [REQUEST_ID],
          },
        }
      : {
          403: {
            description: "The key's account may not use the project in x-project-id",
            schema: errorEnvelopeSchema,
            headers: [REQUEST_ID],
          },
        }),
    404: notFound,
    429: {
      description: "Rate limited",
      schema: errorEnvelopeSchema,
      headers: [REQUEST_ID, RETRY_AFTER, ...RATE_LIMIT_HEADERS],
    },
    500: {
      description: "Unexpected server error (the store could not be read)",
      schema: internalErrorSchema,
      headers: [REQUEST_ID],
    },
  };
}

const ID_PARAM = [
  { name: "response_id", description: "The response's id", schema: responseIdParamSchema },
];

function storedRoutes(prefix: string, paid: boolean): RouteSpec[] {
  const config = paid ? PAY : API_KEY;
  const requestHeaders = paid ? PAY_HEADERS : API_KEY_HEADERS;
  const suffix = paid ? "Paid" : "";
  const route = (
    method: RouteSpec["method"],
    path: string,
    action: RouteAction,
    operationId: string,
    summary: string,
    description: string,
    /** Null for a route that never succeeds here (cancel). */
    ok: ResponseSpec | null,
    extra: Partial<RouteSpec> = {},
  ): RouteSpec => ({
    method,
    path: `${prefix}/v1/responses/{response_id}${path}`,
    action,
    operationId: `${operationId}${suffix}`,
    summary,
    description,
    config,
    pathParams: ID_PARAM,
    requestHeaders,
    responses: ok ? { 200: ok, ...errorsOf(paid) } : errorsOf(paid),
    ...extra,
  });
  return [
    route(
      "GET",
      "",
      "retrieve",
      "getResponse",
      "Retrieve a stored response",
      "The response as it was answered (`store` true, the default), until it is deleted or expires.",
      {
        description: "The stored response",
        schema: responsesResponseSchema,
        headers: [REQUEST_ID],
      },
      {
        query: retrieveQuerySchema,
        responses: {
          200: {
            description: "The stored response",
            schema: responsesResponseSchema,
            headers: [REQUEST_ID],
          },
          400: {
            description:
              "`stream=true`: a stored response is retrieved whole (`error.param`: `stream`); or a parameter given twice or unknown (`error.param` names it)",
            schema: errorEnvelopeSchema,
            headers: [REQUEST_ID],
          },
          ...errorsOf(paid),
        },
      },
    ),
    route(
      "DELETE",
      "",
      "delete",
      "deleteResponse",
      "Delete a stored response",
      "Deletes the stored response and its input items; a conversation continued from it later starts after it.",
      { description: "Deleted", schema: deletedResponseSchema, headers: [REQUEST_ID] },
      {
        responses: {
          200: { description: "Deleted", schema: deletedResponseSchema, headers: [REQUEST_ID] },
          400: {
            description:
              "A query parameter, which this route takes none of (`error.param` names it)",
            schema: errorEnvelopeSchema,
            headers: [REQUEST_ID],
          },
          ...errorsOf(paid),
        },
      },
    ),
    route(
      "POST",
      "/cancel",
      "cancel",
      "cancelResponse",
      "Cancel a background response",
      "As the OpenAI API, only a response created with `background: true` can be cancelled. This service answers every request in the foreground (`background` is accepted and not acted on), so a stored response has always finished: the caller's is a 400 and any other id a 404.",
      null,
      {
        responses: {
          400: {
            description:
              "The caller's response, which was answered in the foreground and cannot be cancelled (`response_not_cancellable`, `error.param`: `response_id`); or a query parameter, which this route takes none of (`invalid_query`)",
            schema: errorEnvelopeSchema,
            headers: [REQUEST_ID],
          },
          ...errorsOf(paid),
        },
      },
    ),
    route(
      "GET",
      "/input_items",
      "list-input-items",
      "listInputItems",
      "List a stored response's input items",
      "The input items of the request that made the response (not those of earlier turns), as message items, paged with `after` and `limit`.",
      { description: "A page of input items", schema: inputItemListSchema, headers: [REQUEST_ID] },
      {
        query: inputItemsQuerySchema,
        responses: {
          200: {
            description: "A page of input items",
            schema: inputItemListSchema,
            headers: [REQUEST_ID],
          },
          400: {
            description:
              "A query parameter out of range, given twice or unknown (`error.param` names it)",
            schema: errorEnvelopeSchema,
            headers: [REQUEST_ID],
          },
          ...errorsOf(paid),
          404: {
            ...notFound,
            description: `${notFound.description}; or \`after\` names no input item of the response (\`input_item_not_found\`, \`param: after\`)`,
          },
        },
      },
    ),
  ];
}

export const storedResponseRoutes: readonly RouteSpec[] = storedRoutes("", false);

/** What a created response's `id` opens, on the route that created it. */
export function storedResponseLinks(paid: boolean): Record<string, LinkSpec> {
  const suffix = paid ? "Paid" : "";
  return linksById("response_id", {
    getResponse: { operationId: `getResponse${suffix}`, description: "The stored response" },
    listInputItems: {
      operationId: `listInputItems${suffix}`,
      description: "Its input items",
    },
    deleteResponse: { operationId: `deleteResponse${suffix}`, description: "Delete it" },
    // Without this link a fuzzer's cancel only ever meets a made-up id's 404,
    // never the 400 `response_not_cancellable` of a real one.
    cancelResponse: {
      operationId: `cancelResponse${suffix}`,
      description: "Cancel it: a 400, as it was answered in the foreground",
    },
  });
}
export const paidStoredResponseRoutes: readonly RouteSpec[] = storedRoutes("/pay", true);
