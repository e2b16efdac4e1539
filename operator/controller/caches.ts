import {
  type KubeConfig,
  type KubernetesObject,
  type ObjectCache,
  type V1EndpointSlice,
  type V1Pod,
} from "@kubernetes/client-node";
import { API_VERSION, GROUP, KIND, PLURAL } from "../../crds/inference-model.js";
import { startWatchedCache, type WatchedCache } from "../../lib/kube/watched-cache.js";
import { errorText } from "../../lib/error-text.js";
import type { Logger } from "../../lib/logger.js";
import { LABEL_MANAGED_BY, LABEL_MODEL, MANAGED_BY } from "../children/labels.js";
import { CHILD_KINDS, type ChildKind } from "./desired.js";

/**
 * The operator's view of the cluster: one list-and-watch cache per kind it
 * reads. Children, pods and EndpointSlices are watched by the managed-by
 * label (Services pass their labels on to their EndpointSlices), so the
 * operator holds only its own objects, not every Deployment in the cluster.
 * Every event is turned into the key of the model it concerns.
 */
export interface Caches extends ClusterView {
  models: WatchedCache<KubernetesObject>;
  children: Record<ChildKind, WatchedCache<KubernetesObject>>;
  pods: WatchedCache<V1Pod>;
  slices: WatchedCache<V1EndpointSlice>;
  synced: Promise<void>;
  stop(): Promise<void>;
}

/**
 * What the reconciler reads: these caches in the operator, an in-memory
 * store in the reconciler's tests.
 */
export interface ClusterView {
  models: ObjectCache<KubernetesObject>;
  children: Record<ChildKind, ObjectCache<KubernetesObject>>;
  pods: ObjectCache<V1Pod>;
  slices: ObjectCache<V1EndpointSlice>;
}

export interface CachesOptions {
  kc: KubeConfig;
  /** Watch one namespace; undefined for all. */
  namespace: string | undefined;
  logger: Logger;
  /** A model's key (namespace/name) was touched by an event. */
  onModelEvent: (key: string) => void;
}

const OWNED = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;

export function startCaches(options: CachesOptions): Caches {
  const { kc, namespace, logger, onModelEvent } = options;

  function watch<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    plural: string,
    labelSelector: string | undefined,
  ): WatchedCache<T> {
    const prefix = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    const path =
      namespace === undefined
        ? `${prefix}/${plural}`
        : `${prefix}/namespaces/${namespace}/${plural}`;
    return startWatchedCache<T>({
      kc,
      path,
      ...(labelSelector === undefined ? {} : { labelSelector }),
      onChange: (obj) => {
        const key = modelKeyOf(obj, kind);
        if (key !== undefined) onModelEvent(key);
      },
      onError: (err, retryInMs) =>
        logger.warn({ kind, err: errorText(err), retryInMs }, "watch broken; restarting"),
    });
  }

  const models = watch<KubernetesObject>(API_VERSION, KIND, PLURAL, undefined);
  const children = Object.fromEntries(
    CHILD_KINDS.map((k) => [
      k.kind,
      watch<KubernetesObject>(k.apiVersion, k.kind, k.plural, OWNED),
    ]),
  ) as Record<ChildKind, WatchedCache<KubernetesObject>>;
  const pods = watch<V1Pod>("v1", "Pod", "pods", OWNED);
  const slices = watch<V1EndpointSlice>(
    "discovery.k8s.io/v1",
    "EndpointSlice",
    "endpointslices",
    OWNED,
  );
  const all = [models, ...Object.values(children), pods, slices];
  return {
    models,
    children,
    pods,
    slices,
    synced: Promise.all(all.map((c) => c.synced)).then(() => undefined),
    stop: async () => {
      await Promise.all(all.map((c) => c.stop()));
    },
  };
}

/**
 * The model an object belongs to: itself, its controlling owner, or (for
 * pods, whose owner is a ReplicaSet, and EndpointSlices, owned by the
 * Service) the model label the operator puts on everything it makes.
 */
export function modelKeyOf(obj: KubernetesObject, kind: string): string | undefined {
  const namespace = obj.metadata?.namespace ?? "";
  if (kind === KIND) return `${namespace}/${obj.metadata?.name ?? ""}`;
  const owner = obj.metadata?.ownerReferences?.find(
    (o) => o.controller === true && o.kind === KIND && o.apiVersion.startsWith(`${GROUP}/`),
  );
  if (owner) return `${namespace}/${owner.name}`;
  const label = obj.metadata?.labels?.[LABEL_MODEL];
  return label === undefined ? undefined : `${namespace}/${label}`;
}
