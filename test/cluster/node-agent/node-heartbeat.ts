import {
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
  type V1Node,
} from "@kubernetes/client-node";
import type { Logger } from "../../../lib/logger.js";
import { buildNode, buildNodeStatus, NODE_AGENT_TAINT, type NodeIdentity } from "./node-object.js";

/**
 * Registers the Node and keeps it Ready the way a kubelet does: a status
 * heartbeat and a Lease in kube-node-lease, both renewed every 10 s. On
 * stop the node is reported NotReady, so nothing mistakes a stopped agent
 * for a working node while the node controller's grace period runs.
 */
export const HEARTBEAT_MS = 10_000;
const LEASE_SECONDS = 40;
const LEASE_NAMESPACE = "kube-node-lease";
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export interface NodeHeartbeat {
  stop(): Promise<void>;
}

export async function registerNode(
  kc: KubeConfig,
  identity: NodeIdentity,
  log: Logger,
): Promise<NodeHeartbeat> {
  const core = kc.makeApiClient(CoreV1Api);
  const leases = kc.makeApiClient(CoordinationV1Api);
  const node = await ensureNode(core, identity, log);
  const since = new Date();
  const beat = async (ready: boolean, message: string): Promise<void> => {
    const status = buildNodeStatus(identity, ready, message, new Date(), since);
    await core.patchNodeStatus({ name: identity.name, body: { status } }, mergePatch);
  };
  await beat(true, "node agent is posting ready status");
  await renewLease(leases, node);
  log.info({ node: identity.name, podCIDR: identity.podCIDR }, "node registered and ready");

  let stopped = false;
  const timer = setInterval(() => {
    if (stopped) return;
    Promise.all([beat(true, "node agent is posting ready status"), renewLease(leases, node)]).catch(
      (err: unknown) => log.warn({ err: (err as Error).message }, "node heartbeat failed"),
    );
  }, HEARTBEAT_MS);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await beat(false, "node agent stopped").catch((err: unknown) =>
        log.warn({ err: (err as Error).message }, "could not mark the node NotReady"),
      );
    },
  };
}

/**
 * Creates the Node or brings an existing one back to what this agent needs.
 * spec.podCIDR cannot change once set, so a node registered earlier with
 * another range is deleted and created again.
 */
async function ensureNode(core: CoreV1Api, identity: NodeIdentity, log: Logger): Promise<V1Node> {
  const desired = buildNode(identity);
  let existing = await core.readNode({ name: identity.name }).catch(notFoundAsUndefined);
  if (existing?.spec?.podCIDR && existing.spec.podCIDR !== identity.podCIDR) {
    log.warn(
      { node: identity.name, was: existing.spec.podCIDR },
      "node has another pod range, recreating it",
    );
    await core.deleteNode({ name: identity.name });
    await waitUntilGone(core, identity.name);
    existing = undefined;
  }
  if (!existing) return core.createNode({ body: desired });
  const otherTaints = (existing.spec?.taints ?? []).filter((t) => t.key !== NODE_AGENT_TAINT.key);
  return core.patchNode(
    {
      name: identity.name,
      body: {
        metadata: { labels: desired.metadata?.labels },
        spec: {
          ...(existing.spec?.podCIDR
            ? {}
            : { podCIDR: identity.podCIDR, podCIDRs: [identity.podCIDR] }),
          taints: [...otherTaints, NODE_AGENT_TAINT],
        },
      },
    },
    mergePatch,
  );
}

async function waitUntilGone(core: CoreV1Api, name: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const node = await core.readNode({ name }).catch(notFoundAsUndefined);
    if (!node) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`node ${name} was not deleted within 10 s`);
}

/** The Lease the node lifecycle controller reads; owned by the Node so it goes with it. */
async function renewLease(leases: CoordinationV1Api, node: V1Node): Promise<void> {
  const name = node.metadata!.name!;
  const lease: V1Lease = {
    metadata: {
      name,
      namespace: LEASE_NAMESPACE,
      ownerReferences: [{ apiVersion: "v1", kind: "Node", name, uid: node.metadata!.uid! }],
    },
    spec: {
      holderIdentity: name,
      leaseDurationSeconds: LEASE_SECONDS,
      renewTime: new V1MicroTime(),
    },
  };
  const existing = await leases
    .readNamespacedLease({ name, namespace: LEASE_NAMESPACE })
    .catch(notFoundAsUndefined);
  if (!existing) {
    await leases.createNamespacedLease({ namespace: LEASE_NAMESPACE, body: lease });
    return;
  }
  lease.metadata!.resourceVersion = existing.metadata?.resourceVersion;
  await leases.replaceNamespacedLease({ name, namespace: LEASE_NAMESPACE, body: lease });
}

export function notFoundAsUndefined(err: unknown): undefined {
  if ((err as { code?: number }).code === 404) return undefined;
  throw err;
}
