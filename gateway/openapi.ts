import { z } from "zod";
import type { HeaderSpec, RouteSpec } from "./routes/route-spec.js";

/**
 * The OpenAPI 3.1 document, generated from the route specs and the very zod
 * schemas that validate requests, so it cannot drift from the code.
 * OpenAPI 3.1 schemas are JSON Schema 2020-12, which zod emits natively.
 */
type JsonObject = Record<string, unknown>;

function schemaOf(schema: z.ZodType, io: "input" | "output"): JsonObject {
  const json = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as JsonObject;
  delete json.$schema;
  return json;
}

function headerObject(header: HeaderSpec): JsonObject {
  return { description: header.description, required: header.required, schema: { type: "string" } };
}

function operation(route: RouteSpec): JsonObject {
  const responses: JsonObject = {};
  for (const [status, response] of Object.entries(route.responses)) {
    responses[status] = {
      description: response.description,
      ...(response.headers
        ? { headers: Object.fromEntries(response.headers.map((h) => [h.name, headerObject(h)])) }
        : {}),
      ...(response.schema
        ? { content: { "application/json": { schema: schemaOf(response.schema, "output") } } }
        : {}),
    };
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: route.description,
    security: [{ [route.security === "api-key" ? "apiKey" : "paySignature"]: [] }],
    parameters: route.requestHeaders
      .filter((h) => !(route.security === "pay-signature" && h.name === "pay-signature"))
      .filter((h) => !(route.security === "api-key" && h.name === "x-api-key"))
      .map((h) => ({
        in: "header",
        name: h.name,
        required: h.required,
        description: h.description,
        schema: { type: "string" },
      })),
    requestBody: {
      required: true,
      content: { "application/json": { schema: schemaOf(route.requestBody, "input") } },
    },
    responses,
  };
}

export function buildOpenApiDocument(routes: readonly RouteSpec[], version: string): JsonObject {
  const paths: JsonObject = {};
  for (const route of routes) {
    paths[route.path] = { [route.method.toLowerCase()]: operation(route) };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Modelgate Responses API",
      version,
      description:
        "Model inference behind a Responses-style API, on an API-key route and a payment-signature route.",
    },
    paths,
    components: {
      securitySchemes: {
        apiKey: {
          type: "apiKey",
          in: "header",
          name: "x-api-key",
          description: "Also accepted as `Authorization: Bearer <key>`.",
        },
        paySignature: {
          type: "apiKey",
          in: "header",
          name: "pay-signature",
          description:
            "`t=<unix-seconds>,kid=<key-id>,v1=<hex>`: HMAC-SHA256 of the raw request body with the signing secret of `kid`.",
        },
      },
    },
  };
}
