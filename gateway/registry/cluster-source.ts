import {
  CustomObjectsApi,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1EndpointSlice,
} from "@kubernetes/client-node";
import { GROUP, PLURAL, VERSION } from "../../crds/inference-model.js";
import { startWatchedCache, type WatchedCache } from "../../lib/kube/watched-cache.js";
import type { Logger } from "../../lib/logger.js";
import { ClusterIndex, sameRoutable } from "./cluster-index.js";
import { objectKey, parseInferenceModel } from "./parse-model.js";
import type { ModelRegistry } from "./registry.js";
import { SERVICE_NAME_LABEL } from "../../lib/kube/endpoint-slices.js";

/**
 * The registry's cluster source: list-and-watch caches of InferenceModels
 * and of EndpointSlices, joined in a ClusterIndex, with every event copied
 * into the registry for just the models it touches. A watch event reaches
 * the registry in the same tick, so a pod that turns ready is routable as
 * soon as the API server tells us, and one that goes away stops getting
 * requests just as fast. The gateway never reads pods or Services.
 */
export interface ClusterSourceOptions {
  kc: KubeConfig;
  registry: ModelRegistry;
  logger: Logger;
  /** Watch one namespace; default all. */
  namespace?: string | undefined;
  /** Told how many InferenceModels are currently skipped as invalid. */
  onRejected?: (count: number) => void;
}

export class ClusterSource {
  private readonly index = new ClusterIndex();
  /** Invalid objects by key, with the problem last logged, so a status write does not log it again. */
  private readonly rejected = new Map<string, string>();
  private caches: [WatchedCache<KubernetesObject>, WatchedCache<V1EndpointSlice>] | null = null;
  private isSynced = false;

  constructor(private readonly options: ClusterSourceOptions) {}

  /** Starts both watches; the promise resolves once each has delivered its first full list. */
  start(): Promise<void> {
    const { kc, namespace, logger } = this.options;
    const onError = (what: string) => (err: unknown, retryInMs: number) =>
      logger.warn({ err, retryInMs, namespace: namespace ?? "(all)" }, `${what} watch failed`);

    const customObjects = kc.makeApiClient(CustomObjectsApi);
    const models = startWatchedCache<KubernetesObject>({
      kc,
      path: namespace
        ? `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}`
        : `/apis/${GROUP}/${VERSION}/${PLURAL}`,
      list: () =>
        (namespace
          ? customObjects.listNamespacedCustomObject({
              group: GROUP,
              version: VERSION,
              namespace,
              plural: PLURAL,
            })
          : customObjects.listClusterCustomObject({
              group: GROUP,
              version: VERSION,
              plural: PLURAL,
            })) as Promise<KubernetesListObject<KubernetesObject>>,
      onChange: (object, verb) => this.onModel(object, verb),
      onError: onError("InferenceModel"),
    });

    const discovery = kc.makeApiClient(DiscoveryV1Api);
    // Only slices that name a Service can belong to a model.
    const labelSelector = SERVICE_NAME_LABEL;
    const slices = startWatchedCache<V1EndpointSlice>({
      kc,
      path: namespace
        ? `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`
        : "/apis/discovery.k8s.io/v1/endpointslices",
      labelSelector,
      list: () =>
        namespace
          ? discovery.listNamespacedEndpointSlice({ namespace, labelSelector })
          : discovery.listEndpointSliceForAllNamespaces({ labelSelector }),
      onChange: (slice, verb) => this.onSlice(slice, verb),
      onError: onError("EndpointSlice"),
    });

    this.caches = [models, slices];
    return Promise.all([models.synced, slices.synced]).then(() => {
      this.isSynced = true;
      const all = this.options.registry.list();
      logger.info(
        {
          models: all.length,
          routable: all.filter((m) => m.endpoints.length > 0).length,
          rejected: this.rejected.size,
          namespace: namespace ?? "(all)",
        },
        "model registry synced from the cluster",
      );
    });
  }

  /** True once both watches have listed everything at least once. */
  get synced(): boolean {
    return this.isSynced;
  }

  async stop(): Promise<void> {
    const caches = this.caches;
    this.caches = null;
    if (caches) await Promise.all(caches.map((c) => c.stop()));
  }

  private onModel(object: KubernetesObject, verb: "add" | "update" | "delete"): void {
    const key = objectKey(object);
    if (verb === "delete") {
      this.setRejected(key, null);
      this.publish(this.index.deleteModel(key));
      return;
    }
    const parsed = parseInferenceModel(object);
    if (parsed.ok) {
      this.setRejected(key, null);
      this.publish(this.index.setModel(parsed.model));
      return;
    }
    const problem = `${parsed.field}: ${parsed.message}`;
    if (this.rejected.get(key) !== problem) {
      this.options.logger.error(
        { model: key, field: parsed.field },
        `skipping InferenceModel ${key}: ${problem}`,
      );
    }
    this.setRejected(key, problem);
    // It may have been valid before this change: stop routing to it.
    this.publish(this.index.deleteModel(key));
  }

  private onSlice(slice: V1EndpointSlice, verb: "add" | "update" | "delete"): void {
    this.publish(verb === "delete" ? this.index.deleteSlice(slice) : this.index.setSlice(slice));
  }

  private setRejected(key: string, problem: string | null): void {
    const before = this.rejected.size;
    if (problem === null) this.rejected.delete(key);
    else this.rejected.set(key, problem);
    if (this.rejected.size !== before) this.options.onRejected?.(this.rejected.size);
  }

  /** Copies the index's view of these models into the registry, skipping what did not change. */
  private publish(keys: readonly string[]): void {
    const { registry } = this.options;
    for (const key of keys) {
      const next = this.index.routable(key);
      const current = registry.get(key);
      if (!next) {
        if (current) registry.remove(key);
      } else if (!sameRoutable(current, next)) {
        registry.upsert(next);
      }
    }
  }
}
