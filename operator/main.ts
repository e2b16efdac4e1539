import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { loadKubeConfig } from "../lib/kube/kube-config.js";
import { createLogger, type Logger } from "../lib/logger.js";
import {
  identityOf,
  leaseNamespaceOf,
  parseOperatorConfig,
  type OperatorConfig,
} from "./config.js";
import { startCaches } from "./controller/caches.js";
import { clusterWriter, type Writer } from "./controller/cluster-writer.js";
import { Controller } from "./controller/controller.js";
import { eventSink } from "./controller/event-sink.js";
import { createReconciler } from "./controller/reconciler.js";
import { startHealthServer } from "./health-server.js";
import { startLeaseElection, type LeaseElection } from "./leader/lease-election.js";
import { createOperatorMetrics } from "./metrics.js";

/**
 * The operator process: caches start at once (so a standby replica is warm
 * and ready), workers only while this replica leads. Losing the Lease stops
 * the workers and ends the process, as controller-runtime does: a fresh
 * start is the one state that is sure to hold no stale leadership.
 */
export interface OperatorHandle {
  port: number;
  isLeader(): boolean;
  /** Graceful: finishes reconciles in flight, releases the Lease, closes the watches. */
  stop(): Promise<void>;
  /** Resolves when the operator stops on its own (the Lease was lost). */
  lost: Promise<void>;
}

/** How long a model waits before being reconciled again without any event. */
const RESYNC_MS = 10 * 60_000;

export async function runOperator(
  config: OperatorConfig,
  logger: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<OperatorHandle> {
  const kc = loadKubeConfig(config.kubeconfig);
  const metrics = createOperatorMetrics();
  const identity = identityOf(config, env);
  const writer = countingWriter(clusterWriter(kc, identity), metrics);

  // The three refer to each other; none is called before all exist (workers
  // start only after the caches have synced).
  const controller: Controller = new Controller({
    reconcile: (key) => reconcile(key),
    workers: config.workers,
    logger,
    metrics,
    resyncMs: RESYNC_MS,
  });
  const caches = startCaches({
    kc,
    namespace: config.watchNamespace,
    logger,
    onModelEvent: (key) => controller.enqueue(key),
  });
  const events = eventSink(writer, logger);
  const reconcile = createReconciler({
    caches,
    writer,
    events,
    build: { image: config.runtimeImage, imagePullPolicy: config.runtimeImagePullPolicy },
    logger,
  });
  let synced = false;
  void caches.synced.then(() => {
    synced = true;
    logger.info({ models: caches.models.list().length }, "caches synced");
  });

  const server: Server = await startHealthServer({
    host: config.host,
    port: config.port,
    registry: metrics.registry,
    ready: () => synced,
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port, identity, namespace: config.watchNamespace ?? "(all)" }, "operator started");

  let signalLost: () => void = () => undefined;
  const lost = new Promise<void>((resolve) => (signalLost = resolve));

  const lead = async () => {
    metrics.leader.set(1);
    await caches.synced;
    // Everything known is reconciled once on taking over: the previous
    // leader may have stopped half-way.
    for (const model of caches.models.list()) {
      controller.enqueue(`${model.metadata?.namespace ?? ""}/${model.metadata?.name ?? ""}`);
    }
    controller.start();
  };

  let election: LeaseElection | undefined;
  if (config.leaderElect) {
    election = startLeaseElection({
      kc,
      namespace: leaseNamespaceOf(config, env),
      name: config.leaseName,
      identity,
      leaseDurationMs: config.leaseDurationSeconds * 1000,
      renewDeadlineMs: config.renewDeadlineSeconds * 1000,
      retryPeriodMs: config.retryPeriodSeconds * 1000,
      logger,
      onStartedLeading: () => void lead(),
      onStoppedLeading: () => {
        metrics.leader.set(0);
        void stop().then(signalLost);
      },
    });
  } else {
    void lead();
  }

  let stopping: Promise<void> | undefined;
  function stop(): Promise<void> {
    stopping ??= (async () => {
      await controller.stop();
      await events.flush();
      await election?.stop();
      metrics.leader.set(0);
      await caches.stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    })();
    return stopping;
  }

  return { port, isLeader: () => election?.isLeader() ?? true, stop, lost };
}

function countingWriter(writer: Writer, metrics: ReturnType<typeof createOperatorMetrics>): Writer {
  return {
    apply: (obj) => {
      metrics.writes.inc({ kind: obj.kind ?? "unknown" });
      return writer.apply(obj);
    },
    remove: (ref) => {
      metrics.writes.inc({ kind: ref.kind });
      return writer.remove(ref);
    },
    writeStatus: (model, status) => {
      metrics.writes.inc({ kind: "InferenceModel/status" });
      return writer.writeStatus(model, status);
    },
    event: (model, event) => writer.event(model, event),
  };
}

/** `modelgate operator`: run until SIGTERM/SIGINT (graceful) or the Lease is lost (exit 1). */
export async function serveOperator(flags: Record<string, unknown>): Promise<void> {
  const config = parseOperatorConfig(flags, process.env);
  const logger = createLogger({ level: config.logLevel, name: "operator" });
  const handle = await runOperator(config, logger);
  const shutdown = async (signal: string) => {
    logger.info({ signal }, "shutting down: finishing reconciles in flight");
    await handle.stop();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  void handle.lost.then(() => process.exit(1));
}
