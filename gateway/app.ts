import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { sendError } from "../lib/http/error-reply.js";
import { HttpErrors } from "../lib/http/http-errors.js";
import { acceptJsonBodiesOnly } from "../lib/http/json-body.js";
import { logFieldsOf } from "../lib/http/log-fields.js";
import type { GatewayMetrics } from "./metrics.js";
import { buildOpenApiDocument } from "./openapi.js";
import { echoRequestId, requestIdFrom } from "./plugins/request-id.js";
import type { ApiKeyAuth, PaymentGate, RateLimit, UsageMeter } from "./ports.js";
import type { ModelRegistry } from "./registry/registry.js";
import { payResponsesHandler } from "./routes/pay-responses/pay-responses.handler.js";
import { payResponsesRoute } from "./routes/pay-responses/pay-responses.route.js";
import { responsesHandler } from "./routes/responses/responses.handler.js";
import { responsesRoute } from "./routes/responses/responses.route.js";
import type { RouteSpec } from "./routes/route-spec.js";
import type { Upstream } from "./upstream/forward.js";

export const ROUTES: readonly RouteSpec[] = [responsesRoute, payResponsesRoute];

/** Everything the gateway uses, built by the caller: the app creates no clients of its own. */
export interface GatewayDeps {
  registry: ModelRegistry;
  upstream: Upstream;
  keys: ApiKeyAuth;
  rateLimit: RateLimit;
  meter: UsageMeter;
  pay: PaymentGate | null;
  metrics: GatewayMetrics;
  logger: FastifyBaseLogger;
  now: () => number;
  bodyLimit?: number;
  version?: string;
  /**
   * Whether the model source has delivered everything once (/readyz);
   * default ready. Until then every model would look unknown.
   */
  ready?: () => boolean;
}

export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** The interface's version (spec section 9), not the software's. */
export const API_VERSION = "1.0.0";

/** The gateway's HTTP server, not yet listening. */
export function buildGateway(deps: GatewayDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    genReqId: requestIdFrom,
    // One line per request, written when it completes (below), not two.
    logController: new LogController({
      requestIdLogLabel: "requestId",
      disableRequestLogging: true,
    }),
    // Connections from a load balancer are long-lived; keep them open.
    keepAliveTimeout: 65_000,
  });
  acceptJsonBodiesOnly(app);
  echoRequestId(app);
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply, deps.now));
  app.setNotFoundHandler((request) => {
    throw HttpErrors.notFound(request.method, request.url);
  });

  app.addHook("onResponse", (request, reply, done) => {
    // One line per request, at completion, with the caller's ids.
    reply.log.info(
      {
        ...logFieldsOf(request),
        method: request.method,
        url: request.url,
        statusCode: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      "request completed",
    );
    const url = request.routeOptions.url;
    const route =
      url === payResponsesRoute.path ? "pay" : url === responsesRoute.path ? "api-key" : null;
    if (route) {
      const body = request.body as { model?: unknown } | undefined;
      const model = typeof body?.model === "string" ? body.model : "";
      // Only known ids become label values: a caller cannot grow the label set.
      const known = deps.registry.resolve(model) ? model : "";
      deps.metrics.requests.inc({ route, status_code: String(reply.statusCode), model: known });
      deps.metrics.duration.observe({ route }, reply.elapsedTime / 1000);
    }
    done();
  });

  app.post(responsesRoute.path, responsesHandler(deps));
  app.post(payResponsesRoute.path, payResponsesHandler(deps));

  const openapi = buildOpenApiDocument(ROUTES, deps.version ?? API_VERSION);
  app.get("/openapi.json", () => openapi);
  app.get("/healthz", () => ({ ok: true }));
  app.get("/readyz", (_request, reply) => {
    const models = deps.registry.list().length;
    if (deps.ready && !deps.ready()) {
      return reply.code(503).send({ ok: false, reason: "model registry not synced yet", models });
    }
    return { ok: true, models };
  });
  app.get("/metrics", async (_request, reply) =>
    reply
      .header("content-type", deps.metrics.registry.contentType)
      .send(await deps.metrics.registry.metrics()),
  );
  return app;
}
