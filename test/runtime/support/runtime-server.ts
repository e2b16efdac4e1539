import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { pino } from "pino";
import { buildRuntime } from "../../../runtime/app.js";
import { createRuntimeMetrics, type RuntimeMetrics } from "../../../runtime/metrics.js";
import {
  DEFAULT_THROUGHPUT,
  ModelService,
  type ThroughputOptions,
} from "../../../runtime/model-service.js";
import { loadModel, type LoadOptions } from "../../../runtime/model/load-model.js";
import { generateFixtures } from "../../fixtures/generate.js";

/** A real runtime listening on loopback, serving one model, for integration tests. */
export interface RunningRuntime {
  url: string;
  app: FastifyInstance;
  service: ModelService;
  metrics: RuntimeMetrics;
  post(body: unknown, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
}

export async function fixtureFolder(name: string): Promise<string> {
  const folders = await generateFixtures();
  const folder = folders[name];
  if (!folder) throw new Error(`no fixture model ${name}`);
  return folder;
}

export async function startRuntime(
  options: Partial<LoadOptions> & { path: string; modelId: string },
  throughput: Partial<ThroughputOptions> = {},
  random: () => number = Math.random,
  logger: FastifyBaseLogger = pino({ level: "silent" }),
): Promise<RunningRuntime> {
  const model = await loadModel({ overflow: "truncate", threads: 1, ...options });
  const metrics = createRuntimeMetrics({ model: options.modelId });
  const service = new ModelService(
    model,
    { ...DEFAULT_THROUGHPUT, ...throughput },
    metrics,
    random,
  );
  const app = buildRuntime({
    modelId: options.modelId,
    service: () => service,
    metrics,
    now: Date.now,
    logger,
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    app,
    service,
    metrics,
    post: (body, headers = {}) =>
      fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    async close() {
      service.close();
      await app.close();
      await model.session.release();
    },
  };
}
