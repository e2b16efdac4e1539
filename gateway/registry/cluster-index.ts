import type { V1EndpointSlice } from "@kubernetes/client-node";
import type { InferenceModel } from "../../crds/inference-model.js";
import { childNames } from "../../crds/child-names.js";
import { objectKey } from "./parse-model.js";
import { routableModel, type RoutableModel } from "./registry.js";
import { serviceNameOf } from "../../lib/kube/endpoint-slices.js";
import { endpointsFromSlices } from "./slice-endpoints.js";

/**
 * What the cluster source knows, joined: valid InferenceModels, and the
 * EndpointSlices of their Services, indexed both ways so that an event
 * names exactly the models it affects. No I/O: the watch shell feeds events
 * in and copies the affected models into the registry.
 *
 * A model's Service is found from its name (crds/child-names.ts), so
 * a slice can arrive before or after its model, or belong to no model yet.
 */
export class ClusterIndex {
  private readonly models = new Map<string, InferenceModel>();
  /** Model key -> `namespace/service`. */
  private readonly serviceOfModel = new Map<string, string>();
  /** `namespace/service` -> model keys; a set, as two model names can map to one Service name. */
  private readonly modelsOfService = new Map<string, Set<string>>();
  /** `namespace/service` -> slices by name. */
  private readonly slicesOfService = new Map<string, Map<string, V1EndpointSlice>>();
  /** Slice key -> `namespace/service` it was filed under, in case its label changes. */
  private readonly serviceOfSlice = new Map<string, string>();

  /** Adds or replaces a model; returns the keys to recompute. */
  setModel(model: InferenceModel): string[] {
    const key = objectKey(model);
    this.unlinkModel(key);
    const service = `${model.metadata.namespace ?? "default"}/${childNames(model.metadata.name).service}`;
    this.models.set(key, model);
    this.serviceOfModel.set(key, service);
    setIn(this.modelsOfService, service, key);
    return [key];
  }

  deleteModel(key: string): string[] {
    this.unlinkModel(key);
    return [key];
  }

  setSlice(slice: V1EndpointSlice): string[] {
    const key = objectKey(slice);
    const before = this.unlinkSlice(key);
    const name = serviceNameOf(slice);
    if (name === undefined) return this.modelKeysOf(before);
    const service = `${slice.metadata?.namespace ?? "default"}/${name}`;
    let slices = this.slicesOfService.get(service);
    if (!slices) this.slicesOfService.set(service, (slices = new Map<string, V1EndpointSlice>()));
    slices.set(key, slice);
    this.serviceOfSlice.set(key, service);
    return [...new Set([...this.modelKeysOf(before), ...this.modelKeysOf(service)])];
  }

  deleteSlice(slice: V1EndpointSlice): string[] {
    return this.modelKeysOf(this.unlinkSlice(objectKey(slice)));
  }

  /** The model as the registry should hold it, or undefined when it is gone. */
  routable(key: string): RoutableModel | undefined {
    const model = this.models.get(key);
    const service = this.serviceOfModel.get(key);
    if (!model || !service) return undefined;
    const slices = this.slicesOfService.get(service)?.values() ?? [];
    return routableModel(model, endpointsFromSlices(slices, service.split("/")[1]!));
  }

  private modelKeysOf(service: string | undefined): string[] {
    return service ? [...(this.modelsOfService.get(service) ?? [])] : [];
  }

  private unlinkModel(key: string): void {
    const service = this.serviceOfModel.get(key);
    if (service) deleteIn(this.modelsOfService, service, key);
    this.serviceOfModel.delete(key);
    this.models.delete(key);
  }

  /** Forgets a slice; returns the Service it was filed under. */
  private unlinkSlice(key: string): string | undefined {
    const service = this.serviceOfSlice.get(key);
    if (service === undefined) return undefined;
    this.serviceOfSlice.delete(key);
    const slices = this.slicesOfService.get(service);
    slices?.delete(key);
    if (slices?.size === 0) this.slicesOfService.delete(service);
    return service;
  }
}

function setIn(map: Map<string, Set<string>>, key: string, value: string): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set<string>()));
  set.add(value);
}

function deleteIn(map: Map<string, Set<string>>, key: string, value: string): void {
  const set = map.get(key);
  set?.delete(value);
  if (set?.size === 0) map.delete(key);
}

function sameValue(x: unknown, y: unknown): boolean {
  if (x instanceof Set && y instanceof Set)
    return x.size === y.size && [...x].every((v) => y.has(v));
  if (Array.isArray(x) && Array.isArray(y)) {
    return x.length === y.length && x.every((v, i) => v === y[i]);
  }
  return x === y;
}

/**
 * Whether the registry's copy already says the same: the operator writes a
 * model's status often, and an unchanged model need not reindex the registry.
 */
export function sameRoutable(a: RoutableModel | undefined, b: RoutableModel | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  const keys = new Set([...Object.keys(x), ...Object.keys(y)]);
  return [...keys].every((k) => sameValue(x[k], y[k]));
}
