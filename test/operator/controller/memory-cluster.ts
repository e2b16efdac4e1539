import type {
  KubernetesObject,
  ObjectCache,
  V1EndpointSlice,
  V1Pod,
} from "@kubernetes/client-node";
import type { ModelRef } from "../../../operator/children/owner.js";
import type { ClusterView } from "../../../operator/controller/caches.js";
import type { ModelEvent, Writer } from "../../../operator/controller/cluster-writer.js";
import { CHILD_KINDS, type ChildKind } from "../../../operator/controller/desired.js";
import type { ModelStatus } from "../../../operator/status.js";

/**
 * The reconciler's world in memory, for the middle tier of operator tests
 * (between the pure builders and the real control plane), as KServe tests
 * its reconcilers against a store rather than a cluster: caches the
 * reconciler reads, and a writer that records every write in order and puts
 * it into those caches, so the next pass sees what the last one wrote.
 *
 * The writer keeps the few API server behaviours the reconciler relies on:
 * apply returns the stored object (with a uid, and a generation that moves
 * when the spec does); a Deployment applied without `replicas` keeps the
 * count it had (the HPA's); a status write lands on the model; removing a
 * missing child is not an error.
 */
export class MemoryCache<T extends KubernetesObject> implements ObjectCache<T> {
  private readonly objects = new Map<string, T>();

  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(`${namespace ?? ""}/${name}`);
  }

  list(namespace?: string): T[] {
    return [...this.objects.values()].filter(
      (o) => namespace === undefined || o.metadata?.namespace === namespace,
    );
  }

  put(obj: T): T {
    this.objects.set(`${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`, obj);
    return obj;
  }

  delete(name: string, namespace: string): boolean {
    return this.objects.delete(`${namespace}/${name}`);
  }
}

type Stored = KubernetesObject & { spec?: Record<string, unknown>; status?: unknown };

export interface MemoryCluster {
  view: ClusterView & {
    models: MemoryCache<KubernetesObject>;
    children: Record<ChildKind, MemoryCache<KubernetesObject>>;
    pods: MemoryCache<V1Pod>;
    slices: MemoryCache<V1EndpointSlice>;
  };
  writer: Writer;
  /** Every write, in order: "apply Service smollm", "remove PodDisruptionBudget smollm-runtime", "status smollm". */
  writes: string[];
  /** The objects as the reconciler applied them, in order. */
  applied: KubernetesObject[];
  /** Events as the writer received them. */
  events: { model: string; event: ModelEvent }[];
  /** Makes the next write that matches ("apply Deployment smollm-runtime") fail. */
  failNext(write: string): void;
  /** The most writes (not events) that were ever in flight at once. */
  maxConcurrentWrites(): number;
}

export function memoryCluster(): MemoryCluster {
  const children = Object.fromEntries(
    CHILD_KINDS.map((k) => [k.kind, new MemoryCache<KubernetesObject>()]),
  ) as Record<ChildKind, MemoryCache<KubernetesObject>>;
  const view = {
    models: new MemoryCache<KubernetesObject>(),
    children,
    pods: new MemoryCache<V1Pod>(),
    slices: new MemoryCache<V1EndpointSlice>(),
  };
  const writes: string[] = [];
  const applied: KubernetesObject[] = [];
  const events: MemoryCluster["events"] = [];
  const failing = new Set<string>();
  let uids = 0;
  let inFlight = 0;
  let maxInFlight = 0;

  /** A write takes a turn of the event loop, as a request does, so overlapping writes show. */
  async function record(write: string): Promise<void> {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      await new Promise((resolve) => setImmediate(resolve));
      if (failing.delete(write)) throw new Error(`injected failure: ${write}`);
      writes.push(write);
    } finally {
      inFlight--;
    }
  }

  const writer: Writer = {
    async apply(obj) {
      const kind = obj.kind as ChildKind;
      await record(`apply ${kind} ${obj.metadata?.name}`);
      applied.push(structuredClone(obj));
      const cache = children[kind];
      const before: Stored | undefined = cache.get(obj.metadata!.name!, obj.metadata!.namespace);
      const next = structuredClone(obj) as Stored;
      if (kind === "Deployment" && next.spec && next.spec.replicas === undefined) {
        next.spec.replicas = before?.spec?.replicas ?? 1;
      }
      const sameSpec = before && JSON.stringify(before.spec) === JSON.stringify(next.spec);
      const generation = before?.metadata?.generation ?? 0;
      next.metadata = {
        ...next.metadata,
        uid: before?.metadata?.uid ?? `uid-${++uids}`,
        generation: sameSpec ? generation : generation + 1,
      };
      if (before?.status !== undefined) next.status = before.status;
      return cache.put(next);
    },
    async remove(ref) {
      await record(`remove ${ref.kind} ${ref.name}`);
      children[ref.kind].delete(ref.name, ref.namespace);
    },
    async writeStatus(model: ModelRef, status: ModelStatus) {
      await record(`status ${model.metadata.name}`);
      const stored = view.models.get(model.metadata.name, model.metadata.namespace);
      if (stored) view.models.put({ ...structuredClone(stored), status } as KubernetesObject);
    },
    async event(model: ModelRef, event: ModelEvent) {
      await Promise.resolve();
      events.push({ model: model.metadata.name, event });
    },
  };

  return {
    view,
    writer,
    writes,
    applied,
    events,
    failNext: (write) => failing.add(write),
    maxConcurrentWrites: () => maxInFlight,
  };
}
