import { z } from "zod";
import { MODEL_TASKS, requestSchemaFor, type ModelTask } from "../api/responses-request.js";
import type { RouteName } from "../crds/inference-model.js";
import type { ModelRegistry } from "./registry/registry.js";
import type { HeaderSpec, RouteSpec } from "./routes/route-spec.js";

/**
 * The OpenAPI 3.1 document, generated from the route table and the very zod
 * schemas that validate requests (OpenAPI 3.1 schemas are JSON Schema
 * 2020-12, which zod emits natively), so it cannot drift from the code.
 *
 * A model route's body is a `oneOf` of its task variants (text generation,
 * zero-shot classification), each with `model` an `enum` of the models of
 * that task the registry serves on the route now: an unknown model is
 * outside the document, as it is outside what the gateway accepts, and the
 * document follows the registry as models come and go.
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

const TASK_TITLES: Record<ModelTask, string> = {
  "text-generation": "Text generation request",
  "zero-shot-classification": "Zero-shot classification request",
  "entity-extraction": "Entity extraction request",
};

/** The JSON Schema of each task's request, made once: only the model enum changes. */
const taskSchemas = new Map<ModelTask, JsonObject>(
  MODEL_TASKS.map((task) => [task, schemaOf(requestSchemaFor(task), "input")]),
);

/**
 * A copy of `schema` whose `model` property is `model`, wherever zod put the
 * object that declares it: at the root, or inside the `allOf`, `anyOf` or
 * `oneOf` members an intersection or union becomes.
 */
function withModel(schema: JsonObject, model: JsonObject): JsonObject {
  let out = schema;
  const properties = schema.properties as JsonObject | undefined;
  if (properties?.model) out = { ...out, properties: { ...properties, model } };
  for (const combinator of ["allOf", "anyOf", "oneOf"] as const) {
    const members = schema[combinator] as JsonObject[] | undefined;
    if (members) out = { ...out, [combinator]: members.map((member) => withModel(member, model)) };
  }
  return out;
}

/** The request body schema of a model route, with the registry's current models. */
export function requestBodySchema(route: RouteName, registry: ModelRegistry): JsonObject {
  const variants: JsonObject[] = [];
  for (const task of MODEL_TASKS) {
    const models = registry
      .list()
      .filter((m) => m.task === task && m.routes.has(route))
      .map((m) => m.id)
      .sort();
    if (models.length === 0) continue;
    const model = {
      type: "string",
      enum: models,
      description: "A model served on this route whose task is this variant's",
    };
    variants.push({ title: TASK_TITLES[task], ...withModel(taskSchemas.get(task)!, model) });
  }
  if (variants.length === 0) {
    return { description: "No model is served on this route yet: every body is refused", not: {} };
  }
  return { oneOf: variants };
}

function headerObject(header: HeaderSpec): JsonObject {
  return { description: header.description, required: header.required, schema: { type: "string" } };
}

const SECURITY_SCHEME = { "api-key": "apiKey", "pay-signature": "paySignature" } as const;

/**
 * One frame of a `text/event-stream` answer, as SSE tooling reads it: an
 * `event` line naming the type and a `data` line holding the event as JSON,
 * described through `contentMediaType` and `contentSchema` (JSON Schema
 * 2020-12), so a reader that decodes embedded content checks the event too.
 */
function sseFrameSchema(event: z.ZodType): JsonObject {
  return {
    type: "object",
    required: ["data"],
    properties: {
      event: { type: "string" },
      data: {
        type: "string",
        contentMediaType: "application/json",
        contentSchema: schemaOf(event, "output"),
      },
    },
  };
}

/**
 * Query parameters from the zod object that validates them: a list is
 * `name=a&name=b` (form, exploded), as OpenAPI's default says and the
 * handler reads.
 */
function queryParameters(query: z.ZodObject): JsonObject[] {
  const schema = schemaOf(query, "input");
  const properties = schema.properties as Record<string, JsonObject>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      in: "query",
      name,
      required: required.has(name),
      ...(description ? { description } : {}),
      schema: rest,
      ...(rest.type === "array" ? { style: "form", explode: true } : {}),
    };
  });
}

function operation(route: RouteSpec, registry: ModelRegistry): JsonObject {
  const responses: JsonObject = {};
  for (const [status, response] of Object.entries(route.responses)) {
    responses[status] = {
      description: response.description,
      ...(response.headers
        ? { headers: Object.fromEntries(response.headers.map((h) => [h.name, headerObject(h)])) }
        : {}),
      ...(response.schema || response.eventStream
        ? {
            content: {
              ...(response.schema
                ? { "application/json": { schema: schemaOf(response.schema, "output") } }
                : {}),
              ...(response.eventStream
                ? { "text/event-stream": { schema: sseFrameSchema(response.eventStream) } }
                : {}),
            },
          }
        : {}),
      ...(response.links ? { links: response.links } : {}),
    };
  }
  const { auth, modelRoute } = route.config;
  // The credential header is described by the security scheme, not as a parameter.
  const credential =
    auth === "api-key" ? "x-api-key" : auth === "pay-signature" ? "pay-signature" : null;
  const headers = route.requestHeaders
    .filter((h) => h.name !== credential)
    .map((h) => ({
      in: "header",
      name: h.name,
      required: h.required,
      description: h.description,
      schema: { type: "string" },
    }));
  const pathParams = (route.pathParams ?? []).map((p) => ({
    in: "path",
    name: p.name,
    required: true,
    description: p.description,
    schema: schemaOf(p.schema, "input"),
  }));
  const body = modelRoute
    ? { "application/json": { schema: requestBodySchema(modelRoute, registry) } }
    : route.body
      ? { [route.body.mediaType]: { schema: schemaOf(route.body.schema, "input") } }
      : null;
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: route.description,
    ...(auth !== "none" ? { security: [{ [SECURITY_SCHEME[auth]]: [] }] } : {}),
    parameters: [...pathParams, ...headers, ...(route.query ? queryParameters(route.query) : [])],
    ...(body ? { requestBody: { required: true, content: body } } : {}),
    responses,
  };
}

export function buildOpenApiDocument(
  routes: readonly RouteSpec[],
  registry: ModelRegistry,
  version: string,
): JsonObject {
  const paths: Record<string, JsonObject> = {};
  for (const route of routes) {
    paths[route.path] = {
      ...paths[route.path],
      [route.method.toLowerCase()]: operation(route, registry),
    };
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
            "`t=<unix-seconds>,kid=<key-id>,v1=<hex>`: HMAC-SHA256 of the raw request body with the signing secret of `kid` (or `v2=<hex>` over `<t>.<body>`). Each signature is accepted once.",
        },
      },
    },
  };
}

/**
 * The document, rebuilt only when the registry changes: serving it costs a
 * lookup, and a scrape after a model arrives lists it.
 */
export function openApiDocumentOf(
  routes: readonly RouteSpec[],
  registry: ModelRegistry,
  version: string,
): () => JsonObject {
  let cached: JsonObject | null = null;
  registry.onChange(() => {
    cached = null;
  });
  return () => (cached ??= buildOpenApiDocument(routes, registry, version));
}
