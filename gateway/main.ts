import { buildGateway } from "./app.js";
import { createGatewayComponents } from "./components.js";
import { parseGatewayConfig, registrySourceOf } from "./config.js";
import { createGatewayLogger } from "./logging.js";
import { buildOpsServer } from "./ops-server.js";
import { startRegistrySource } from "./registry/start-source.js";

/** `modelgate gateway`: read the configuration, build, listen, stop cleanly on a signal. */
export async function serveGateway(flags: Record<string, unknown>): Promise<void> {
  const config = parseGatewayConfig(flags, process.env);
  const registrySource = registrySourceOf(config);
  const logger = createGatewayLogger(config.logLevel);
  const components = await createGatewayComponents(config, logger);
  const { deps } = components;
  const source = await startRegistrySource(registrySource, {
    registry: deps.registry,
    logger,
    onRejected: (count) => deps.metrics.registryRejected.set(count),
  });
  const app = buildGateway(deps);
  const ops = buildOpsServer({ ...deps, ready: () => source.ready() });

  const shutdown = async (signal: string) => {
    logger.info({ signal }, "shutting down: finishing requests in flight");
    // The registry stays live while requests drain, so none is sent to a pod that left.
    await app.close();
    await source.stop();
    await components.close();
    await ops.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  // Health first: the kubelet's probes find the process as soon as it serves.
  await ops.listen({ host: config.host, port: config.metricsPort });
  await app.listen({ host: config.host, port: config.port });
}
