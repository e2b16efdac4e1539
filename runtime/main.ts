import { createLogger } from "../lib/logger.js";
import { buildRuntime } from "./app.js";
import { parseServeConfig } from "./config.js";
import { defaultIntraOpThreads } from "./engine/cpu-limit.js";
import { createRuntimeMetrics } from "./metrics.js";
import { ModelService } from "./model-service.js";
import { loadModel } from "./model/load-model.js";

/**
 * `modelgate runtime serve`: listen at once (so liveness answers during a
 * long load), load and warm the model, then turn ready. A model that cannot
 * load ends the process with the reason, which is what a pod's logs show.
 */
export async function serveRuntime(flags: Record<string, unknown>): Promise<void> {
  const config = parseServeConfig(flags, process.env);
  const logger = createLogger({ level: config.logLevel, name: "runtime" });
  const metrics = createRuntimeMetrics({ model: config.modelId });
  let service: ModelService | null = null;
  const app = buildRuntime({
    modelId: config.modelId,
    service: () => service,
    metrics,
    now: Date.now,
    logger,
  });

  const shutdown = async (signal: string) => {
    logger.info({ signal }, "shutting down: draining requests in flight");
    service?.close();
    await app.close();
    await service?.model.session.release();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));

  await app.listen({ host: config.host, port: config.port });
  const threads = config.threads ?? defaultIntraOpThreads();
  logger.info({ model: config.modelId, path: config.modelPath, threads }, "loading model");
  const started = performance.now();
  try {
    const model = await loadModel({
      path: config.modelPath,
      onnxFile: config.onnxFile,
      task: config.task,
      zeroShotMethod: config.zeroShotMethod,
      maxTokens: config.maxTokens,
      overflow: config.overflow,
      threads,
      hypothesisTemplate: config.hypothesisTemplate,
      calibration: {
        ...(config.similarityMidpoint !== undefined ? { midpoint: config.similarityMidpoint } : {}),
        ...(config.similaritySteepness !== undefined
          ? { steepness: config.similaritySteepness }
          : {}),
      },
    });
    for (const note of model.notes) logger.warn(note);
    const loaded = new ModelService(model, config, metrics, Math.random);
    const budget = loaded.kvCacheBudget;
    if (budget) {
      logger.info(
        { kvCacheTokens: budget.tokens, kvCacheMiB: Math.round(budget.bytes / 2 ** 20) },
        "KV cache budget",
      );
    }
    await loaded.warmup();
    service = loaded;
  } catch (error) {
    logger.fatal({ err: error }, `cannot serve the model: ${(error as Error).message}`);
    await app.close();
    process.exit(1);
  }
  logger.info(
    { model: config.modelId, task: service.task, ms: Math.round(performance.now() - started) },
    "model loaded and warmed; ready",
  );
}
