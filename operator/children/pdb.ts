import type { V1PodDisruptionBudget } from "@kubernetes/client-node";
import { childNames } from "../../crds/child-names.js";
import type { InferenceModel } from "../../crds/inference-model.js";
import { selectorLabels } from "./labels.js";
import { childMetadata } from "./owner.js";

/**
 * The PodDisruptionBudget (policy/v1): voluntary evictions (node drains,
 * cluster upgrades) take at most one runtime pod at a time, so the others
 * keep serving while the evicted one fetches and loads elsewhere.
 *
 * `maxUnavailable: 1` rather than `minAvailable`: it follows the replica
 * count the HPA picks, and a drain can always make progress, whereas
 * `minAvailable: 1` on a model scaled to one replica would block it forever.
 * Unhealthy pods may always be evicted, so a pod stuck failing its fetch
 * never blocks a drain either.
 *
 * Built only when more than one replica can run; with one, a budget can only
 * block drains or allow everything, and null lets the apply layer delete it.
 */
export function buildPdb(model: InferenceModel): V1PodDisruptionBudget | null {
  if (maxReplicasOf(model) <= 1) return null;
  const names = childNames(model.metadata.name);
  return {
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata: childMetadata(model, names.pdb),
    spec: {
      maxUnavailable: 1,
      selector: { matchLabels: selectorLabels(model) },
      unhealthyPodEvictionPolicy: "AlwaysAllow",
    },
  };
}

/** The most replicas the model may run: the HPA's maximum, else spec.replicas. */
export function maxReplicasOf(model: Pick<InferenceModel, "spec">): number {
  return model.spec.autoscaling ? model.spec.autoscaling.maxReplicas : model.spec.replicas;
}
