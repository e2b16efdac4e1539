import type { V1ResourceRequirements } from "@kubernetes/client-node";
import type { InferenceModelSpec } from "../../crds/inference-model.js";

/**
 * Container resources from spec.resources, and the one check on them the
 * schema cannot make: a request above its limit, which the API server
 * rejects when the Deployment is applied. Retrying such an apply can never
 * succeed, so status reports it as an invalid spec instead.
 */
type Resources = NonNullable<InferenceModelSpec["resources"]>;
type ResourceList = NonNullable<Resources["requests"]>;
const RESOURCE_NAMES = ["cpu", "memory"] as const;

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

/** A message per resource whose request exceeds its limit; empty when none does. */
export function requestsAboveLimits(resources: Resources | undefined): string[] {
  const problems: string[] = [];
  for (const name of RESOURCE_NAMES) {
    const request = resources?.requests?.[name];
    const limit = resources?.limits?.[name];
    if (request === undefined || limit === undefined) continue;
    const r = parseQuantity(request);
    const l = parseQuantity(limit);
    if (r !== undefined && l !== undefined && r > l) {
      problems.push(
        `spec.resources.requests.${name} (${request}) exceeds spec.resources.limits.${name} (${limit})`,
      );
    }
  }
  return problems;
}

const SUFFIX: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

/**
 * The value of a quantity in the schema's subset (a decimal and one of the
 * suffixes above), or undefined for anything else. Floating point is exact
 * enough to order two quantities a user wrote by hand.
 */
export function parseQuantity(quantity: string): number | undefined {
  const match = /^([0-9]+(?:\.[0-9]+)?)(m|k|Ki|Mi|Gi|Ti|M|G|T)?$/.exec(quantity);
  if (!match?.[1]) return undefined;
  const factor = SUFFIX[match[2] ?? ""];
  return factor === undefined ? undefined : Number(match[1]) * factor;
}
