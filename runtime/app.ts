import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { sendError } from "../api/error-envelope.js";
import { RUNTIME_BODY_LIMIT_BYTES } from "../api/runtime-wire.js";
import { HttpErrors } from "../lib/http/http-errors.js";
import { acceptJsonBodiesOnly } from "../lib/http/json-body.js";
import "../lib/http/reason-phrases.js";
import type { RuntimeContext } from "./context.js";
import { healthRoutes } from "./routes/health.route.js";
import { responsesRoute } from "./routes/responses.route.js";

export interface RuntimeDeps extends RuntimeContext {
  logger: FastifyBaseLogger;
  /** Largest request body accepted, in bytes. */
  bodyLimit?: number;
}

/** What the gateway may send at most (api/runtime-wire.ts); it bounds its callers itself. */
export const DEFAULT_BODY_LIMIT = RUNTIME_BODY_LIMIT_BYTES;

/** The runtime's HTTP server, not yet listening. */
export function buildRuntime(deps: RuntimeDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // One line per request is the gateway's job; the runtime logs what goes wrong.
    logController: new LogController({ disableRequestLogging: true }),
  });
  const context: RuntimeContext = {
    modelId: deps.modelId,
    service: deps.service,
    metrics: deps.metrics,
    now: deps.now,
  };
  acceptJsonBodiesOnly(app);
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply, deps.now));
  app.setNotFoundHandler((request) => {
    throw HttpErrors.notFound(request.method, request.url);
  });
  app.addHook("onResponse", async (request, reply) => {
    // Health checks and scrapes are not Responses requests.
    if (request.routeOptions.url !== "/v1/responses") return;
    deps.metrics.requests.inc({ status_code: String(reply.statusCode) });
  });
  healthRoutes(app, context);
  responsesRoute(app, context);
  return app;
}
