import type { InferenceModel } from "../../crds/inference-model.js";

/**
 * Labels of every child. The full set follows the Kubernetes recommended
 * labels; the selector uses only name, instance and component, because a
 * Deployment's selector is immutable: a label that may one day change value
 * (a version, the managing tool) must never be in it, or the Deployment
 * would have to be deleted and recreated.
 */
export const LABEL_NAME = "app.kubernetes.io/name";
export const LABEL_INSTANCE = "app.kubernetes.io/instance";
export const LABEL_COMPONENT = "app.kubernetes.io/component";
export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
export const LABEL_PART_OF = "app.kubernetes.io/part-of";
/** Lets `kubectl get pods -l serving.modelgate.dev/model=<name>` find a model's pods across kinds. */
export const LABEL_MODEL = "serving.modelgate.dev/model";

export const RUNTIME_APP_NAME = "modelgate-runtime";
export const RUNTIME_COMPONENT = "runtime";
export const MANAGED_BY = "modelgate-operator";
export const PART_OF = "modelgate";

type Named = Pick<InferenceModel, "metadata">;

/** The immutable selector: name, instance and component only. */
export function selectorLabels(model: Named): Record<string, string> {
  return {
    [LABEL_NAME]: RUNTIME_APP_NAME,
    [LABEL_INSTANCE]: model.metadata.name,
    [LABEL_COMPONENT]: RUNTIME_COMPONENT,
  };
}

/** Every label a child (and its pods) carries; always a superset of the selector. */
export function standardLabels(model: Named): Record<string, string> {
  return {
    ...selectorLabels(model),
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_PART_OF]: PART_OF,
    [LABEL_MODEL]: model.metadata.name,
  };
}

/**
 * The selector in the string form the scale subresource publishes in
 * `status.selector` (what the HPA and `kubectl scale` read): `k=v,k=v`,
 * sorted by key so the status does not change between reconciles.
 */
export function selectorString(model: Named): string {
  return Object.entries(selectorLabels(model))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}
