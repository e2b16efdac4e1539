import { z } from "zod";

/**
 * The InferenceModel resource (serving.modelgate.dev/v1alpha1): the one
 * hand-written definition. The CRD YAML, the gateway's file registry and the
 * operator all read it; TypeScript types are inferred from it.
 */
export const GROUP = "serving.modelgate.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "InferenceModel";
export const PLURAL = "inferencemodels";

export const ROUTES = ["api-key", "pay"] as const;
export type RouteName = (typeof ROUTES)[number];

/** Kubernetes resource quantities, e.g. "500m", "2", "1Gi". */
const quantity = z
  .string()
  .regex(
    /^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$/,
    "must be a Kubernetes quantity such as 500m, 2 or 1Gi",
  );

const resourceList = z.object({ cpu: quantity.optional(), memory: quantity.optional() });

/** A decimal amount as a string, so prices never pass through binary floating point. */
const price = z.string().regex(/^[0-9]+(\.[0-9]+)?$/, "must be a decimal number such as 0.50");

export const sourceSchema = z.object({
  uri: z
    .string()
    .min(1)
    .describe(
      "Where the weights come from: hf://org/name@revision, https://, s3://, pvc://, file://",
    ),
  revision: z
    .string()
    .min(1)
    .optional()
    .describe("Revision of an hf:// source; overrides @revision"),
  checksums: z
    .record(z.string(), z.string().regex(/^[0-9a-f]{64}$/, "must be a lowercase sha256 hex digest"))
    .optional()
    .describe("Expected sha256 of files, by path inside the model folder"),
});

export const autoscalingSchema = z
  .object({
    minReplicas: z.number().int().min(1).default(1),
    maxReplicas: z.number().int().min(1).max(1000),
    targetCPUUtilizationPercentage: z.number().int().min(1).max(100).default(70),
  })
  .refine((a) => a.minReplicas <= a.maxReplicas, {
    message: "minReplicas must not exceed maxReplicas",
    path: ["minReplicas"],
  });

export const runtimeTuningSchema = z.object({
  threads: z
    .number()
    .int()
    .min(1)
    .max(256)
    .optional()
    .describe("ONNX intra-op threads; default: the CPU limit"),
  maxBatchSize: z.number().int().min(1).max(1024).optional(),
  batchWindowMs: z.number().int().min(0).max(1000).optional(),
  generationConcurrency: z.number().int().min(1).max(256).optional(),
  maxQueue: z.number().int().min(1).max(100000).optional(),
  prefixCacheBytes: z
    .number()
    .int()
    .min(0)
    .max(2 ** 40)
    .optional()
    .describe(
      "Text generation: bytes of KV cache kept for prompt prefixes, least recently used out; 0 disables; default 128 MiB (count it in the memory limit)",
    ),
  zeroShotMethod: z.enum(["nli", "similarity"]).optional(),
  hypothesisTemplate: z.string().includes("{}").optional(),
  /** Similarity zero-shot: score = 1 / (1 + exp(-steepness * (cosine - midpoint))). */
  similarityMidpoint: z.number().min(-1).max(1).optional(),
  similaritySteepness: z.number().positive().max(1000).optional(),
});

export const pricingSchema = z.object({
  serviceSlug: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "must be lowercase letters, digits and dashes")
    .describe("The slug usage is settled and reported under (pay-usage)"),
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/)
    .default("USD"),
  inputPerMillionTokens: price.default("0"),
  outputPerMillionTokens: price.default("0"),
  batchDiscount: z
    .string()
    .regex(/^(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$/, "must be a fraction from 0 to 1, such as 0.5")
    .default("0.5")
    .describe(
      "The share taken off both prices for requests run in a batch (/v1/batches): 0.5 is half price",
    ),
});

/** Where the runtime pods may run: copied into the pod template as they are. */
export const schedulingSchema = z.object({
  nodeSelector: z
    .record(z.string(), z.string())
    .optional()
    .describe("Node labels a runtime pod's node must have"),
  tolerations: z
    .array(
      z.object({
        key: z.string().optional(),
        operator: z.enum(["Exists", "Equal"]).optional(),
        value: z.string().optional(),
        effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
        tolerationSeconds: z.number().int().optional(),
      }),
    )
    .max(32)
    .optional()
    .describe("Taints the runtime pods tolerate"),
});

export const inferenceModelSpecSchema = z.object({
  model: z
    .string()
    .min(1)
    .max(253)
    .optional()
    .describe("The model id clients send; defaults to the object's name"),
  task: z.enum(["text-generation", "zero-shot-classification", "entity-extraction"]),
  source: sourceSchema,
  maxTokens: z.number().int().min(1).max(1048576).optional().describe("Input token limit"),
  overflow: z
    .enum(["truncate", "error"])
    .default("truncate")
    .describe("Past maxTokens: cut the input, or answer 420"),
  replicas: z.number().int().min(0).max(1000).default(1),
  autoscaling: autoscalingSchema.optional(),
  resources: z
    .object({ requests: resourceList.optional(), limits: resourceList.optional() })
    .optional(),
  runtime: runtimeTuningSchema.optional(),
  scheduling: schedulingSchema.optional(),
  timeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .default(30)
    .describe("How long the gateway waits for the runtime before answering 408"),
  routes: z
    .array(z.enum(ROUTES))
    .min(1)
    .default(["api-key", "pay"])
    .describe("Which gateway routes serve this model"),
  pricing: pricingSchema.optional(),
});

export const conditionSchema = z.object({
  type: z.enum(["Ready", "Progressing", "Degraded"]),
  status: z.enum(["True", "False", "Unknown"]),
  reason: z.string(),
  message: z.string(),
  observedGeneration: z.number().int().optional(),
  lastTransitionTime: z.string(),
});

export const inferenceModelStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: z.array(conditionSchema).optional(),
  replicas: z.number().int().optional(),
  readyReplicas: z.number().int().optional(),
  /** Selector for the scale subresource (HPA, kubectl scale). */
  selector: z.string().optional(),
  /** The Service address the gateway uses, e.g. http://name.namespace.svc:8080. */
  endpoint: z.string().optional(),
});

export const inferenceModelSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: z.looseObject({
    name: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS-1123 label")
      .max(63),
    namespace: z.string().optional(),
  }),
  spec: inferenceModelSpecSchema,
  status: inferenceModelStatusSchema.optional(),
});

export type InferenceModel = z.infer<typeof inferenceModelSchema>;
export type InferenceModelSpec = z.infer<typeof inferenceModelSpecSchema>;
export type InferenceModelStatus = z.infer<typeof inferenceModelStatusSchema>;

/** The id clients send in `model`. */
export function modelIdOf(model: Pick<InferenceModel, "metadata" | "spec">): string {
  return model.spec.model ?? model.metadata.name;
}
