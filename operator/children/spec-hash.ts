import { createHash } from "node:crypto";
import {
  modelIdOf,
  type InferenceModel,
  type InferenceModelSpec,
} from "../../crds/inference-model.js";

/**
 * The pod-template annotation that makes pods roll exactly when the spec
 * fields the runtime reads change. Most of those fields already appear in
 * the template as flags or resources; the hash also names the cause of a
 * rollout in `kubectl get rs -o yaml`, and covers fields a future version
 * might pass through a file or a ConfigMap instead.
 *
 * Fields only the gateway or the autoscaler reads are left out, so a change
 * of replicas, routes or prices never restarts a pod.
 */
export const SPEC_HASH_ANNOTATION = "serving.modelgate.dev/spec-hash";

/**
 * Every spec field, marked as read by the pod (true) or not (false). The
 * mapped type makes a field added to the schema fail to compile here until
 * someone decides which side it is on.
 */
export const POD_RELEVANT: { readonly [K in keyof Required<InferenceModelSpec>]: boolean } = {
  model: true,
  task: true,
  source: true,
  maxTokens: true,
  overflow: true,
  resources: true,
  runtime: true,
  scheduling: true, // where the pods run; the template carries it too
  replicas: false, // the Deployment's replicas, or the HPA's
  autoscaling: false, // the HPA
  timeoutSeconds: false, // the gateway's wait
  routes: false, // the gateway
  pricing: false, // the gateway's metering
};

/** 16 hex digits of sha256 over the canonical JSON of the pod-relevant fields. */
export function specHash(model: Pick<InferenceModel, "metadata" | "spec">): string {
  const relevant: Record<string, unknown> = {};
  for (const [key, used] of Object.entries(POD_RELEVANT)) {
    if (used) relevant[key] = model.spec[key as keyof InferenceModelSpec];
  }
  // The id the runtime is told, not the optional field: an unset `model`
  // and one equal to the object's name start identical pods.
  relevant["model"] = modelIdOf(model);
  return createHash("sha256").update(canonicalJson(relevant)).digest("hex").slice(0, 16);
}

/** JSON with object keys sorted at every depth and undefined members dropped. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const member = (value as Record<string, unknown>)[key];
    if (member !== undefined) out[key] = sortKeys(member);
  }
  return out;
}
