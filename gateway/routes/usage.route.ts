import {
  completionsUsagePageSchema,
  completionsUsageQuerySchema,
  costsPageSchema,
  costsQuerySchema,
} from "../../api/usage.js";
import {
  API_KEY_HEADER,
  envelope,
  keyReadErrors,
  RATE_LIMIT_HEADERS,
  REQUEST_ID,
  RETRY_AFTER,
} from "./common-responses.js";
import type { GatewayRouteConfig } from "./route-config.js";
import type { ResponseSpec, RouteSpec } from "./route-spec.js";

/**
 * The usage endpoints (docs/usage.md): an API key reads its own account's
 * usage; an admin key (keys file `role: admin`) every account's. Rate
 * limited like the key's other requests; neither metered nor billed.
 */
const config: GatewayRouteConfig = {
  auth: "api-key",
  rateLimit: "api-key",
  metering: "none",
  modelRoute: null,
  metricsName: "usage",
  errorBody: "envelope",
};

const errors: Record<number, ResponseSpec> = {
  ...keyReadErrors,
  400: envelope("A query parameter is unknown, malformed or out of range (`error.param` names it)"),
  403: envelope(
    "A member key asked for another account's usage (`account_ids`, `group_by=account_id`), or named a project in x-project-id its account may not use",
  ),
  503: envelope("The usage ledger's database cannot be reached; retry", [RETRY_AFTER]),
};

export const completionsUsageRoute: RouteSpec = {
  method: "GET",
  path: "/v1/organization/usage/completions",
  operationId: "getCompletionsUsage",
  summary: "Usage per time bucket (API key)",
  description:
    "Tokens and requests of the caller's account (every account's, for an admin key) per time bucket, optionally split by model, project, API key, route or account, with totals over the whole range. In the shape of OpenAI's completions usage API.",
  config,
  action: "usage-completions",
  query: completionsUsageQuerySchema,
  requestHeaders: [API_KEY_HEADER, REQUEST_ID],
  responses: {
    200: {
      description: "A page of buckets",
      schema: completionsUsagePageSchema,
      headers: [REQUEST_ID, ...RATE_LIMIT_HEADERS],
    },
    ...errors,
  },
};

export const costsRoute: RouteSpec = {
  method: "GET",
  path: "/v1/organization/costs",
  operationId: "getCosts",
  summary: "Costs per day (API key)",
  description:
    "What the caller's account (every account, for an admin key) was charged per day at the models' prices when each request was answered, one result per currency, optionally split by project, line item (model) or account. In the shape of OpenAI's costs API.",
  config,
  action: "usage-costs",
  query: costsQuerySchema,
  requestHeaders: [API_KEY_HEADER, REQUEST_ID],
  responses: {
    200: {
      description: "A page of daily buckets",
      schema: costsPageSchema,
      headers: [REQUEST_ID, ...RATE_LIMIT_HEADERS],
    },
    ...errors,
  },
};
