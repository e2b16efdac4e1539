import type { FastifyInstance, FastifyRequest } from "fastify";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import type { GatewayMetrics } from "../metrics.js";
import { matchedRouteOf, routeConfigOf } from "../routes/route-config.js";

/**
 * One line per request, written when it completes, and the request metrics.
 * The line carries the route's path, never the URL as sent: a query string
 * is where a careless client puts its key (`?key=mg_live_…`), and the route
 * path is what operators group by anyway. Metrics are labelled by route,
 * status and model, the model only when the registry knows it, so a caller
 * cannot grow the label set.
 */
export function accessLogHooks(app: FastifyInstance, metrics: GatewayMetrics): void {
  app.addHook("onResponse", (request, reply, done) => {
    reply.log.info(
      {
        ...logFieldsOf(request),
        method: request.method,
        path: pathOf(request),
        statusCode: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      "request completed",
    );
    const route = routeConfigOf(request).metricsName;
    if (route !== null) {
      metrics.requests.inc({
        route,
        status_code: String(reply.statusCode),
        model: request.model?.id ?? "",
      });
      metrics.duration.observe({ route }, reply.elapsedTime / 1000);
    }
    done();
  });
}

/** The matched route's path, or for an unmatched request the path it asked for, without a query. */
export function pathOf(request: FastifyRequest): string {
  const route = matchedRouteOf(request).url;
  if (route !== undefined) return route;
  const query = request.url.indexOf("?");
  return query < 0 ? request.url : request.url.slice(0, query);
}
