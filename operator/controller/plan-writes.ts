import type { KubernetesObject } from "@kubernetes/client-node";
import type { InferenceModel } from "../../crds/inference-model.js";
import { isControlledBy } from "../children/owner.js";
import type { ClusterView } from "./caches.js";
import { containsDesired } from "./contains.js";
import type { ChildKind, ChildRef, DesiredChildren } from "./desired.js";

export interface WritePlan {
  /** Children to apply, with what the cache holds of each (undefined: it does not exist). */
  apply: { obj: KubernetesObject; current: KubernetesObject | undefined }[];
  /** Children this model owns that must go. */
  remove: ChildRef[];
}

/** What differs between the desired children and the cached ones. Pure over the cache's contents. */
export function planWrites(
  model: InferenceModel,
  desired: DesiredChildren,
  caches: Pick<ClusterView, "children">,
): WritePlan {
  const namespace = model.metadata.namespace ?? "default";
  const apply = desired.apply
    .map((obj) => ({
      obj,
      current: caches.children[obj.kind as ChildKind].get(obj.metadata!.name!, namespace),
    }))
    .filter(({ obj, current }) => !current || !containsDesired(current, obj));
  const remove = desired.absent.filter((ref) => {
    const current = caches.children[ref.kind].get(ref.name, namespace);
    return current !== undefined && isControlledBy(current, model);
  });
  return { apply, remove };
}
