import { createLogger } from "../lib/logger.js";
import { buildGateway } from "./app.js";
import { createGatewayComponents } from "./components.js";
import { parseGatewayConfig } from "./config.js";
import { FileSource } from "./registry/file-source.js";

/** `modelgate gateway`: read the configuration, build, listen, stop cleanly on a signal. */
export async function serveGateway(flags: Record<string, unknown>): Promise<void> {
  const config = parseGatewayConfig(flags, process.env);
  const logger = createLogger({ level: config.logLevel, name: "gateway" });
  const components = await createGatewayComponents(config, logger);
  const { deps } = components;
  let source: FileSource | null = null;
  if (config.modelsDir) {
    source = new FileSource({ dir: config.modelsDir, registry: deps.registry, logger });
    const loaded = await source.start();
    logger.info(
      { models: loaded.models.length, problems: loaded.problems.length },
      "models loaded from files",
    );
  } else {
    logger.warn("no model source (--models-dir): no model is routable");
  }
  const app = buildGateway(deps);

  const shutdown = async (signal: string) => {
    logger.info({ signal }, "shutting down: finishing requests in flight");
    source?.stop();
    await app.close();
    await components.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  await app.listen({ host: config.host, port: config.port });
}
