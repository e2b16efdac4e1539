import type { ModelTask } from "../../api/responses-request.js";
import { modelIdOf, type InferenceModel, type RouteName } from "../../crds/inference-model.js";

/**
 * What the gateway knows of a model: enough to authorize, route and meter a
 * request. One interface, fed by two sources: YAML files (`modelgate dev`)
 * and the cluster's InferenceModels and EndpointSlices.
 */
export interface RoutableModel {
  /** The `model` value clients send. */
  id: string;
  /** namespace/name of the InferenceModel. */
  key: string;
  task: ModelTask;
  routes: ReadonlySet<RouteName>;
  timeoutMs: number;
  maxTokens: number | undefined;
  /** Past `maxTokens`: whether the runtime may cut the input (`truncate`) or answers 420. */
  overflow: "truncate" | "error";
  /** A zero-shot classifier's own hypothesis template (`spec.runtime`), when it sets one. */
  hypothesisTemplate?: string | undefined;
  serviceSlug: string;
  /** The model's prices (`spec.pricing`): what the ledger records each request cost. */
  prices: ModelPrices;
  /** Base URLs of ready runtime endpoints, e.g. http://10.244.1.5:8080. */
  endpoints: readonly string[];
  /** When its InferenceModel was created, in Unix seconds (0 when it says not): `GET /v1/models`. */
  created: number;
}

export interface ModelPrices {
  currency: string;
  /** Decimal strings, such as "0.50". */
  inputPerMillionTokens: string;
  outputPerMillionTokens: string;
  /** The fraction taken off both prices in a batch (`pricing.batchDiscount`), such as "0.5". */
  batchDiscount: string;
}

/** A model without `pricing` costs nothing: its requests are still metered, at zero. */
export const FREE: ModelPrices = {
  currency: "USD",
  inputPerMillionTokens: "0",
  outputPerMillionTokens: "0",
  batchDiscount: "0.5",
};

export function routableModel(object: InferenceModel, endpoints: readonly string[]): RoutableModel {
  const namespace = object.metadata.namespace ?? "default";
  const id = modelIdOf(object);
  return {
    id,
    key: `${namespace}/${object.metadata.name}`,
    task: object.spec.task,
    routes: new Set(object.spec.routes),
    timeoutMs: object.spec.timeoutSeconds * 1000,
    maxTokens: object.spec.maxTokens,
    overflow: object.spec.overflow,
    hypothesisTemplate: object.spec.runtime?.hypothesisTemplate,
    serviceSlug: object.spec.pricing?.serviceSlug ?? id,
    prices: pricesOf(object),
    endpoints,
    created: createdOf(object),
  };
}

function createdOf(object: InferenceModel): number {
  // A loose object: Kubernetes sets it; a models folder's YAML may not.
  const stamp = (object.metadata as { creationTimestamp?: unknown }).creationTimestamp;
  const at = typeof stamp === "string" ? Date.parse(stamp) : NaN;
  return Number.isNaN(at) ? 0 : Math.floor(at / 1000);
}

function pricesOf(object: InferenceModel): ModelPrices {
  const pricing = object.spec.pricing;
  if (!pricing) return FREE;
  return {
    currency: pricing.currency,
    inputPerMillionTokens: pricing.inputPerMillionTokens,
    outputPerMillionTokens: pricing.outputPerMillionTokens,
    batchDiscount: pricing.batchDiscount,
  };
}

export interface RegistryListener {
  (models: readonly RoutableModel[]): void;
}

/**
 * The current set of models, by id. Sources replace entries by key; lookups
 * are a map read, so the request path never waits on a source.
 */
export class ModelRegistry {
  private byKey = new Map<string, RoutableModel>();
  private byId = new Map<string, RoutableModel>();
  private readonly listeners = new Set<RegistryListener>();
  /** Ids claimed by more than one object: the first key in sort order wins. */
  conflicts: string[] = [];

  resolve(id: string): RoutableModel | undefined {
    return this.byId.get(id);
  }

  /** The entry of one object, by namespace/name, even when another object won its id. */
  get(key: string): RoutableModel | undefined {
    return this.byKey.get(key);
  }

  list(): RoutableModel[] {
    return [...this.byId.values()];
  }

  upsert(model: RoutableModel): void {
    this.byKey.set(model.key, model);
    this.reindex();
  }

  remove(key: string): void {
    if (this.byKey.delete(key)) this.reindex();
  }

  /** Replaces every model of a source at once (the file source reloads whole folders). */
  replaceAll(models: readonly RoutableModel[]): void {
    this.byKey = new Map(models.map((m) => [m.key, m]));
    this.reindex();
  }

  onChange(listener: RegistryListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private reindex(): void {
    const byId = new Map<string, RoutableModel>();
    const conflicts: string[] = [];
    for (const key of [...this.byKey.keys()].sort()) {
      const model = this.byKey.get(key)!;
      if (byId.has(model.id)) conflicts.push(model.id);
      else byId.set(model.id, model);
    }
    this.byId = byId;
    this.conflicts = conflicts;
    const models = this.list();
    for (const listener of this.listeners) listener(models);
  }
}
