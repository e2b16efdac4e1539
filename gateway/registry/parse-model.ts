import { inferenceModelSchema, type InferenceModel } from "../../crds/inference-model.js";

/**
 * An InferenceModel object from the API server, checked with the same zod
 * schema every other reader uses. The CRD's schema rejects most bad objects
 * at write time, but not all (an older CRD, a rule zod and OpenAPI count
 * differently): such an object is reported by field and never routed.
 */
export type ParsedModel =
  { ok: true; model: InferenceModel } | { ok: false; field: string; message: string };

export function parseInferenceModel(object: unknown): ParsedModel {
  const parsed = inferenceModelSchema.safeParse(object);
  if (parsed.success) return { ok: true, model: parsed.data };
  const issue = parsed.error.issues[0]!;
  return { ok: false, field: issue.path.join(".") || "(object)", message: issue.message };
}

interface Named {
  metadata?: { name?: string; namespace?: string };
}

/** `namespace/name`, the registry key of an object, valid or not. */
export function objectKey(object: Named): string {
  return `${object.metadata?.namespace ?? "default"}/${object.metadata?.name ?? ""}`;
}
