import type { FastifyInstance } from "fastify";
import type { RuntimeContext } from "../context.js";

/**
 * KServe's v2 health paths. Live while the process serves HTTP; ready only
 * once the model is loaded and warmed, so no pod gets traffic before then.
 */
export function healthRoutes(app: FastifyInstance, context: RuntimeContext): void {
  app.get("/v2/health/live", () => ({ live: true }));
  app.get("/v2/health/ready", async (_request, reply) => {
    const ready = context.service() !== null;
    return reply.code(ready ? 200 : 503).send({ ready });
  });
  // Queue depth and in-flight gauges are kept current by the admission queue itself.
  app.get("/metrics", async (_request, reply) => {
    return reply
      .header("content-type", context.metrics.registry.contentType)
      .send(await context.metrics.registry.metrics());
  });
}
