import { loadKubeConfig } from "../../lib/kube/kube-config.js";
import type { Logger } from "../../lib/logger.js";
import type { RegistrySource } from "../config.js";
import { ClusterSource } from "./cluster-source.js";
import { FileSource } from "./file-source.js";
import type { ModelRegistry } from "./registry.js";

/**
 * Starts the configured model source for `modelgate gateway`. The gateway
 * listens before the cluster source has synced, so that /healthz answers
 * while /readyz keeps a load balancer away from a gateway that would answer
 * every model with 400 `model_not_found`.
 */
export interface RunningSource {
  /** Whether the registry holds everything the source knows (for /readyz). */
  ready(): boolean;
  /** Resolves once ready; never rejects (the cluster source retries on its own). */
  synced: Promise<void>;
  stop(): Promise<void>;
}

export interface SourceContext {
  registry: ModelRegistry;
  logger: Logger;
  onRejected?: (count: number) => void;
}

export async function startRegistrySource(
  source: RegistrySource,
  context: SourceContext,
): Promise<RunningSource> {
  const { registry, logger } = context;
  if (source.kind === "file") {
    const files = new FileSource({ dir: source.dir, registry, logger });
    const loaded = await files.start();
    logger.info(
      { models: loaded.models.length, problems: loaded.problems.length },
      "models loaded from files",
    );
    return {
      ready: () => true,
      synced: Promise.resolve(),
      stop: () => Promise.resolve(files.stop()),
    };
  }
  const cluster = new ClusterSource({
    kc: loadKubeConfig(source.kubeconfig),
    registry,
    logger,
    namespace: source.namespace,
    ...(context.onRejected ? { onRejected: context.onRejected } : {}),
  });
  const synced = cluster.start();
  return { ready: () => cluster.synced, synced, stop: () => cluster.stop() };
}
