import type { V1ResourceRequirements } from "@kubernetes/client-node";
import type { InferenceModelSpec } from "../../crds/inference-model.js";

/**
 * Container resources from spec.resources, copied as they are (cpu and
 * memory only). A request above its limit never reaches here: the spec check
 * (operator/spec-check.ts) stops such a spec before anything is built.
 */
type Resources = NonNullable<InferenceModelSpec["resources"]>;
type ResourceList = NonNullable<Resources["requests"]>;
export const RESOURCE_NAMES = ["cpu", "memory"] as const;

export function containerResources(resources: Resources | undefined): V1ResourceRequirements {
  const out: V1ResourceRequirements = {};
  const requests = resourceList(resources?.requests);
  const limits = resourceList(resources?.limits);
  if (requests) out.requests = requests;
  if (limits) out.limits = limits;
  return out;
}

function resourceList(list: ResourceList | undefined): Record<string, string> | undefined {
  if (!list) return undefined;
  const out: Record<string, string> = {};
  for (const name of RESOURCE_NAMES) {
    const value = list[name];
    if (value !== undefined) out[name] = value;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}
