import type { KubernetesObject } from "@kubernetes/client-node";
import type { InferenceModel } from "../../crds/inference-model.js";
import { isControlledBy } from "../children/owner.js";
import type { ClusterView } from "./caches.js";
import { containsDesired } from "./contains.js";
import type { ChildKind, ChildRef, DesiredChildren } from "./desired.js";

export interface WritePlan {
  /** Children to apply, in order, with what the cache holds of each (undefined: it does not exist). */
  apply: { obj: KubernetesObject; current: KubernetesObject | undefined }[];
  /** Children this model owns that must go. */
  remove: ChildRef[];
  /**
   * Objects with a child's name that another owner controls (the children of
   * a deleted model of the same name, until the garbage collector takes
   * them): never applied over or deleted. Their removal is an event, so the
   * model is reconciled again then.
   */
  notOwned: KubernetesObject[];
}

/** What differs between the desired children and the cached ones. Pure over the cache's contents. */
export function planWrites(
  model: InferenceModel,
  desired: DesiredChildren,
  caches: Pick<ClusterView, "children">,
): WritePlan {
  const namespace = model.metadata.namespace ?? "default";
  const plan: WritePlan = { apply: [], remove: [], notOwned: [] };
  for (const obj of desired.apply) {
    const current = caches.children[obj.kind as ChildKind].get(obj.metadata!.name!, namespace);
    if (current && !isControlledBy(current, model)) plan.notOwned.push(current);
    else if (!current || !containsDesired(current, obj)) plan.apply.push({ obj, current });
  }
  for (const ref of desired.absent) {
    // Only children we own are deleted; one of that name we do not own is no
    // concern of this model when it asks for no such child.
    const current = caches.children[ref.kind].get(ref.name, namespace);
    if (current !== undefined && isControlledBy(current, model)) plan.remove.push(ref);
  }
  return plan;
}
