import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { loadKubeConfig } from "../../../lib/kube/kube-config.js";
import { startWatchedCache } from "../../../lib/kube/watched-cache.js";
import type { Logger } from "../../../lib/logger.js";
import { AddressPool } from "./address-pool.js";
import { gatewayOf, parseCidr } from "./cidr.js";
import { netnsPrefixOf } from "./names.js";
import { ensureUnreachableRoute, removeStaleSandboxes } from "./network.js";
import { notFoundAsUndefined, registerNode } from "./node-heartbeat.js";
import { PodWorker, type WorkerDeps } from "./pod-worker.js";
import { unsupportedFeatures } from "./unsupported.js";

/**
 * The node agent: the network guard, the Node, a watch on the node's pods
 * and one worker per pod. Reconciliation is level-triggered: every event and
 * a periodic resync compare the pods the API binds to this node with the
 * workers that run, and start or end workers until they agree.
 */
export interface AgentOptions {
  kubeconfigPath?: string;
  nodeName: string;
  /** This node's pods' addresses (spec.podCIDR). */
  podCIDR: string;
  /** The whole test pod range that gets an unreachable route. */
  podRange: string;
  stateDir: string;
  repoRoot: string;
  log: Logger;
}

export interface RunningAgent {
  stop(): Promise<void>;
}

const RESYNC_MS = 10_000;
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export async function startAgent(options: AgentOptions): Promise<RunningAgent> {
  const { nodeName, log } = options;
  const cidr = parseCidr(options.podCIDR);
  const gateway = gatewayOf(cidr);

  // Before anything can create a pod address, so no packet to the test
  // range can ever leave the machine.
  await ensureUnreachableRoute(options.podRange);
  log.info({ range: options.podRange }, "unreachable route in place");
  const stale = await removeStaleSandboxes(netnsPrefixOf(nodeName));
  if (stale.length > 0) log.info({ netns: stale }, "removed sandboxes of an earlier run");
  await removeStaleVolumes(options.stateDir);

  const kc = loadKubeConfig(options.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const heartbeat = await registerNode(
    kc,
    { name: nodeName, podCIDR: options.podCIDR, address: gateway },
    log,
  );

  const pool = new AddressPool(cidr);
  const deps: WorkerDeps = {
    nodeName,
    hostIP: gateway,
    repoRoot: options.repoRoot,
    stateDir: options.stateDir,
    allocateIP: (preferred) => pool.allocate(preferred),
    releaseIP: (ip) => pool.release(ip),
    writeStatus: async (pod, status) => {
      const { name, namespace } = pod.metadata!;
      const written = await core
        .patchNamespacedPodStatus(
          { name: name!, namespace: namespace!, body: { status } },
          mergePatch,
        )
        .catch(notFoundAsUndefined);
      return written !== undefined;
    },
    deletePod: async (pod) => {
      const { name, namespace, uid } = pod.metadata!;
      await core
        .deleteNamespacedPod({
          name: name!,
          namespace: namespace!,
          gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0, preconditions: { uid: uid! } },
        })
        .catch((err: unknown) => {
          // Gone already, or a new pod of the same name: neither is ours to delete.
          const code = (err as { code?: number }).code;
          if (code !== 404 && code !== 409) throw err;
        });
    },
    log,
  };

  const workers = new Map<string, PodWorker>();
  let stopping = false;

  function finish(worker: PodWorker, how: { deleteObject: boolean; reason: string }): void {
    worker
      .terminate(how)
      .catch((err: unknown) =>
        log.error({ pod: worker.key, err: (err as Error).message }, "teardown failed"),
      )
      .finally(() => {
        if (workers.get(worker.uid) === worker) workers.delete(worker.uid);
      });
  }

  function reconcile(pod: V1Pod, verb: "add" | "update" | "delete"): void {
    const uid = pod.metadata?.uid;
    if (uid === undefined || pod.spec?.nodeName !== nodeName) return;
    let worker = workers.get(uid);
    if (verb === "delete") {
      if (worker) finish(worker, { deleteObject: false, reason: "pod removed from the API" });
      return;
    }
    if (stopping) return;
    if (!worker) {
      worker = new PodWorker(pod, deps);
      workers.set(uid, worker);
      const unsupported = unsupportedFeatures(pod);
      if (unsupported.length > 0)
        log.warn({ pod: worker.key, unsupported }, "ignoring unsupported pod features");
      if (!pod.metadata?.deletionTimestamp) {
        log.info({ pod: worker.key }, "pod accepted");
        worker.start();
      }
    }
    worker.update(pod);
    if (pod.metadata?.deletionTimestamp)
      finish(worker, { deleteObject: true, reason: "pod deleted" });
  }

  const cache = startWatchedCache<V1Pod>({
    kc,
    // The informer keeps the query part of the path for its watch requests.
    path: `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`,
    list: () => core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` }),
    onChange: reconcile,
    onError: (err, retryInMs) =>
      log.warn({ err: (err as Error)?.message, retryInMs }, "pod watch broke, restarting"),
  });
  await cache.synced;
  log.info({ node: nodeName }, "watching the node's pods");

  // Catches what an event may have missed: a delete during a watch restart.
  const resync = setInterval(() => {
    const present = new Map(cache.list().map((pod) => [pod.metadata?.uid, pod]));
    for (const worker of workers.values()) {
      if (!present.has(worker.uid))
        finish(worker, { deleteObject: false, reason: "pod no longer in the API" });
    }
    for (const pod of present.values()) reconcile(pod, "update");
  }, RESYNC_MS);

  return {
    async stop() {
      stopping = true;
      clearInterval(resync);
      await cache.stop();
      log.info({ pods: workers.size }, "stopping every pod");
      await Promise.all(
        [...workers.values()].map((w) =>
          w
            .terminate({ deleteObject: false, reason: "node agent stopping" })
            .catch((err: unknown) =>
              log.error({ pod: w.key, err: (err as Error).message }, "teardown failed"),
            ),
        ),
      );
      await heartbeat.stop();
      log.info("node agent stopped");
    },
  };
}

/** emptyDir contents of pods an earlier run left; logs are kept for post-mortems. */
async function removeStaleVolumes(stateDir: string): Promise<void> {
  const podsDir = join(stateDir, "pods");
  const folders = await readdir(podsDir).catch(() => [] as string[]);
  await Promise.all(
    folders.map((f) => rm(join(podsDir, f, "volumes"), { recursive: true, force: true })),
  );
}
