import {
  API_VERSION,
  inferenceModelSchema,
  KIND,
  type InferenceModel,
} from "../../crds/inference-model.js";

/**
 * An InferenceModel as the operator receives it: parsed by the CRD's schema
 * (so defaults are filled in exactly as in production), with the uid,
 * namespace and generation the API server adds.
 */
export interface ModelInput {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  spec?: Record<string, unknown>;
}

export const MINIMAL_SPEC = {
  task: "text-generation",
  source: { uri: "hf://HuggingFaceTB/SmolLM2-135M-Instruct" },
} as const;

export function makeModel(input: ModelInput = {}): InferenceModel {
  return inferenceModelSchema.parse({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: input.name ?? "smollm",
      namespace: input.namespace ?? "models",
      uid: input.uid ?? "0b6c3f2e-1111-4222-8333-944445555666",
      generation: input.generation ?? 1,
    },
    spec: { ...MINIMAL_SPEC, ...input.spec },
  });
}

/** A 63-character DNS label, the longest name an InferenceModel may have. */
export const LONGEST_NAME = `m${"x".repeat(61)}z`;
