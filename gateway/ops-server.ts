import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { sendError } from "../api/error-envelope.js";
import { HttpErrors } from "../lib/http/http-errors.js";
import type { GatewayMetrics } from "./metrics.js";
import type { ModelRegistry } from "./registry/registry.js";
import { answerOtherMethods, servedMethods } from "./routes/route-table.js";

/**
 * The gateway's operations port (`--metrics-port`, 9090 by default):
 * `/metrics`, `/healthz`, `/readyz`, for the kubelet's probes and the
 * scraper. Never on the API port: the metrics name every account and
 * project, and the chart's API Service, Ingress and HTTPRoute do not reach
 * this port.
 */
export interface OpsDeps {
  registry: ModelRegistry;
  metrics: GatewayMetrics;
  logger: FastifyBaseLogger;
  now: () => number;
  /**
   * Whether the model source has delivered everything once (/readyz);
   * default ready. Until then every model would look unknown.
   */
  ready?: () => boolean;
}

export function buildOpsServer(deps: OpsDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply, deps.now));
  app.setNotFoundHandler((request) => {
    throw HttpErrors.notFound(request.method, request.url);
  });
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
  answerOtherMethods(
    app,
    servedMethods(["/healthz", "/readyz", "/metrics"].map((path) => ({ method: "GET", path }))),
  );
  return app;
}
