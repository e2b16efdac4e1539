import { modelIdParamSchema, modelListSchema, modelObjectSchema } from "../../api/models.js";
import { API_KEY_HEADER, envelope, keyReadErrors, REQUEST_ID } from "./common-responses.js";
import type { GatewayRouteConfig } from "./route-config.js";
import type { ResponseSpec, RouteSpec } from "./route-spec.js";

/**
 * The models a key may call (docs/gateway.md): read from the registry, on
 * the API-key route only. Rate limited like the key's other requests;
 * neither metered nor billed.
 */
const config: GatewayRouteConfig = {
  auth: "api-key",
  rateLimit: "api-key",
  metering: "none",
  modelRoute: null,
  metricsName: "models",
  errorBody: "envelope",
};

const errors: Record<number, ResponseSpec> = {
  ...keyReadErrors,
  403: envelope("The key's account may not use the project in x-project-id"),
};

export const modelRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/models",
    operationId: "listModels",
    summary: "List the models (API key)",
    description:
      "The models served on `/v1/responses`, in the shape of OpenAI's models API: each `id` is a `model` value to send.",
    config,
    action: "list-models",
    requestHeaders: [API_KEY_HEADER, REQUEST_ID],
    responses: {
      200: { description: "The models", schema: modelListSchema, headers: [REQUEST_ID] },
      ...errors,
    },
  },
  {
    method: "GET",
    path: "/v1/models/{model}",
    operationId: "retrieveModel",
    summary: "Retrieve a model (API key)",
    description: "One model served on `/v1/responses`.",
    config,
    action: "retrieve-model",
    pathParams: [{ name: "model", description: "The model's id", schema: modelIdParamSchema }],
    requestHeaders: [API_KEY_HEADER, REQUEST_ID],
    responses: {
      200: { description: "The model", schema: modelObjectSchema, headers: [REQUEST_ID] },
      404: envelope("No model has this id on this route (`model_not_found`, `param: model`)"),
      ...errors,
    },
  },
];
