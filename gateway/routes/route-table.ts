import http from "node:http";
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  HTTPMethods,
  RouteHandlerMethod,
} from "fastify";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { RequestBodySchema } from "../plugins/body-admission.js";
import type { RouteHooks } from "../plugins/route-hooks.js";
import type { ModelRegistry } from "../registry/registry.js";
import { inferenceHandler, type InferenceDeps } from "./inference.handler.js";
import { payResponsesRoute } from "./pay-responses.route.js";
import { PLAIN_ROUTE, type GatewayRouteConfig } from "./route-config.js";
import type { RouteAction, RouteSpec } from "./route-spec.js";
import { responsesRoute } from "./responses.route.js";
import { BATCH_ROUTES } from "../batch/batches.routes.js";
import { FILE_ROUTES } from "../batch/files.routes.js";
import {
  cancelHandler,
  deleteHandler,
  inputItemsHandler,
  retrieveHandler,
} from "./stored-responses.handler.js";
import { paidStoredResponseRoutes, storedResponseRoutes } from "./stored-responses.route.js";
import { usageHandlers, type UsageDeps } from "./usage.handler.js";
import { completionsUsageRoute, costsRoute } from "./usage.route.js";
import { modelHandlers } from "./models.handler.js";
import { modelRoutes } from "./models.route.js";

/** Every route of the API, in the order the OpenAPI document lists them. */
export const ROUTES: readonly RouteSpec[] = [
  responsesRoute,
  ...storedResponseRoutes,
  payResponsesRoute,
  ...paidStoredResponseRoutes,
  completionsUsageRoute,
  costsRoute,
  ...modelRoutes,
  ...FILE_ROUTES,
  ...BATCH_ROUTES,
];

/** A path as Fastify writes it: `:name` for OpenAPI's `{name}`. */
export function fastifyPath(path: string): string {
  return path.replace(/\{([A-Za-z0-9_]+)\}/g, ":$1");
}

/**
 * The config a spec's route is registered with: the spec's own, and, for a
 * route that reads no body (no body in its spec and no model), `body:
 * "ignored"`, so that the document and the server agree on which routes
 * judge one.
 */
function routeConfig(spec: RouteSpec): { gateway: GatewayRouteConfig } {
  const readsBody = spec.body !== undefined || spec.config.modelRoute !== null;
  return { gateway: readsBody ? spec.config : { ...spec.config, body: "ignored" } };
}

/** The hooks a route runs, chosen from its config (plugins/route-hooks.ts). */
export type HooksOf = (config: GatewayRouteConfig) => RouteHooks;

/** A route's handler: it answers with the reply it sent, or with a body for Fastify to send. */
type RouteHandler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

export interface RouteTableDeps extends InferenceDeps, UsageDeps {
  registry: ModelRegistry;
}

/**
 * Registers the route table with `route()`, each route with its `config`
 * and the hooks that config asks for. A model route's body is validated by
 * the route (`RequestBodySchema`).
 */
export function registerRoutes(
  scope: FastifyInstance,
  deps: RouteTableDeps,
  hooksOf: HooksOf,
): void {
  const usage = usageHandlers(deps);
  const models = modelHandlers(deps.registry);
  const handlers: Record<Exclude<RouteAction, "files-and-batches">, RouteHandler> = {
    infer: inferenceHandler(deps),
    retrieve: retrieveHandler(deps),
    delete: deleteHandler(deps),
    cancel: cancelHandler(deps),
    "list-input-items": inputItemsHandler(deps),
    "usage-completions": (request) => usage.completionsUsage(request),
    "usage-costs": (request) => usage.costs(request),
    // Synchronous reads of the registry; a refusal thrown becomes the rejection.
    "list-models": () => Promise.resolve(models.list()),
    "retrieve-model": (request) => new Promise((resolve) => resolve(models.retrieve(request))),
  };
  for (const spec of ROUTES) {
    const { modelRoute } = spec.config;
    // The Files and Batch routes are registered with their handlers, in their scope.
    if (spec.action === "files-and-batches") continue;
    const config = routeConfig(spec);
    scope.route({
      method: spec.method,
      url: fastifyPath(spec.path),
      config,
      ...hooksOf(config.gateway),
      ...(modelRoute ? { schema: { body: new RequestBodySchema(deps.registry, modelRoute) } } : {}),
      handler: handlers[spec.action],
    });
  }
}

/**
 * Makes the router know every method Node's HTTP parser takes (WebDAV's
 * PROPFIND and the like, beyond Fastify's own), so that a path that exists
 * answers any of them with its 405 and `Allow` rather than the 404 of no
 * route. CONNECT never reaches a route: Node answers it on its own event.
 */
function routeEveryMethod(app: FastifyInstance): void {
  for (const method of METHODS) {
    if (!app.supportedMethods.includes(method)) app.addHttpMethod(method);
  }
}

/** What a path may be asked for: HEAD follows GET. */
const METHODS = http.METHODS.filter((method) => method !== "CONNECT") as HTTPMethods[];

/**
 * A path the server serves, asked with a method it does not serve, is a 405
 * with `Allow` (RFC 9110 15.5.6), not a 404: the path exists. Registered
 * after every route of the server, from what was registered.
 */
export function answerOtherMethods(
  scope: FastifyInstance,
  served: ReadonlyMap<string, readonly HTTPMethods[]>,
): void {
  routeEveryMethod(scope);
  for (const [path, methods] of served) {
    const allowed = methods.includes("GET") ? [...new Set([...methods, "HEAD" as const])] : methods;
    const others = METHODS.filter((method) => !allowed.includes(method));
    if (others.length === 0) continue;
    const allow = allowed.join(", ");
    // Named as the OpenAPI document names it, not in Fastify's `:param` syntax.
    const documented = path.replace(/:(\w+)/g, "{$1}");
    const refuse = (request: FastifyRequest, reply: FastifyReply) => {
      reply.header("allow", allow);
      throw HttpErrors.methodNotAllowed(request.method, documented, allowed);
    };
    scope.route({
      method: others,
      url: path,
      config: { gateway: PLAIN_ROUTE },
      // Before the body is looked at: a QUERY without Content-Type would
      // otherwise be a 400 for its missing type, though no QUERY is served.
      onRequest: refuse,
      handler: refuse,
    });
  }
}

/** The methods each path serves, from route specs and extra routes. */
export function servedMethods(
  routes: ReadonlyArray<{ method: HTTPMethods; path: string }>,
): Map<string, HTTPMethods[]> {
  const served = new Map<string, HTTPMethods[]>();
  for (const { method, path } of routes) {
    served.set(path, [...(served.get(path) ?? []), method]);
  }
  return served;
}

/**
 * The Files and Batch routes (no model, no inference handler): each spec
 * with the handler of its `operationId`, in a scope that reads multipart
 * forms for the upload.
 */
export function registerManagementRoutes(
  scope: FastifyInstance,
  handlers: Readonly<Record<string, RouteHandlerMethod>>,
  hooksOf: HooksOf,
): void {
  for (const spec of ROUTES) {
    if (spec.action !== "files-and-batches") continue;
    const handler = handlers[spec.operationId];
    if (!handler) throw new Error(`no handler for ${spec.operationId}`);
    const config = routeConfig(spec);
    scope.route({
      method: spec.method,
      url: fastifyPath(spec.path),
      config,
      ...hooksOf(config.gateway),
      handler,
    });
  }
}
