import { API_VERSION, KIND } from "../../crds/inference-model.js";

/**
 * InferenceModel objects with the verdict both schemas must give: used by
 * agreement.test.ts against zod and the generated CRD schema, and meant for
 * the same check against a real API server (kubectl apply --dry-run=server)
 * once the test cluster exists.
 */
type Spec = Record<string, unknown>;
export const minimalSpec: Spec = { task: "text-generation", source: { uri: "hf://org/model" } };

export function model(spec: Spec, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name: "tiny" }, spec, ...extra };
}
export const withSpec = (patch: Spec) => model({ ...minimalSpec, ...patch });
const sha = "a".repeat(64);

export const valid: [string, unknown][] = [
  ["the minimal spec", model(minimalSpec)],
  [
    "every field set",
    withSpec({
      model: "tiny-gpt",
      task: "zero-shot-classification",
      source: { uri: "hf://org/model@main", revision: "abc123", checksums: { "model.onnx": sha } },
      maxTokens: 4096,
      overflow: "error",
      replicas: 0,
      autoscaling: { minReplicas: 2, maxReplicas: 5, targetCPUUtilizationPercentage: 80 },
      resources: {
        requests: { cpu: "500m", memory: "1Gi" },
        limits: { cpu: "2", memory: "2.5Gi" },
      },
      runtime: {
        threads: 4,
        maxBatchSize: 8,
        batchWindowMs: 0,
        generationConcurrency: 2,
        maxQueue: 100,
        zeroShotMethod: "similarity",
        hypothesisTemplate: "This is about {}.",
        similarityMidpoint: -0.5,
        similaritySteepness: 10,
      },
      timeoutSeconds: 3600,
      routes: ["pay"],
      pricing: { serviceSlug: "tiny", currency: "EUR", inputPerMillionTokens: "0.50" },
    }),
  ],
  ["an entity-extraction model", withSpec({ task: "entity-extraction" })],
  [
    "minReplicas equal to maxReplicas",
    withSpec({ autoscaling: { minReplicas: 3, maxReplicas: 3 } }),
  ],
  [
    "minReplicas from its default (1) under maxReplicas 1",
    withSpec({ autoscaling: { maxReplicas: 1 } }),
  ],
  // Neither rejects an unknown field: zod strips it, the API server prunes it.
  ["an unknown spec field", withSpec({ colour: "blue" })],
  [
    "a full status",
    model(minimalSpec, {
      status: {
        observedGeneration: 2,
        replicas: 1,
        readyReplicas: 1,
        selector: "app=x",
        endpoint: "http://tiny.default.svc:8080",
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "Available",
            message: "",
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
      },
    }),
  ],
];

export const invalid: [string, unknown][] = [
  ["no spec", { apiVersion: API_VERSION, kind: KIND, metadata: { name: "tiny" } }],
  [
    "a name that is not a DNS-1123 label",
    { ...model(minimalSpec), metadata: { name: "Tiny_Model" } },
  ],
  ["an unknown task", withSpec({ task: "summarization" })],
  ["no task", model({ source: { uri: "hf://org/model" } })],
  ["no source", model({ task: "text-generation" })],
  ["source without uri", withSpec({ source: { revision: "main" } })],
  ["an empty source uri", withSpec({ source: { uri: "" } })],
  ["an empty revision", withSpec({ source: { uri: "hf://o/m", revision: "" } })],
  [
    "a bad sha256 (upper case)",
    withSpec({ source: { uri: "hf://o/m", checksums: { f: "A".repeat(64) } } }),
  ],
  ["a bad sha256 (short)", withSpec({ source: { uri: "hf://o/m", checksums: { f: "abc" } } })],
  ["an empty model id", withSpec({ model: "" })],
  ["a bad overflow enum", withSpec({ overflow: "drop" })],
  ["replicas -1", withSpec({ replicas: -1 })],
  ["replicas 1.5", withSpec({ replicas: 1.5 })],
  ["replicas as a string", withSpec({ replicas: "1" })],
  ["maxTokens 0", withSpec({ maxTokens: 0 })],
  ["minReplicas > maxReplicas", withSpec({ autoscaling: { minReplicas: 5, maxReplicas: 2 } })],
  ["autoscaling without maxReplicas", withSpec({ autoscaling: { minReplicas: 1 } })],
  ["maxReplicas 0", withSpec({ autoscaling: { maxReplicas: 0 } })],
  [
    "CPU target 101",
    withSpec({ autoscaling: { maxReplicas: 2, targetCPUUtilizationPercentage: 101 } }),
  ],
  ["a bad quantity string", withSpec({ resources: { limits: { memory: "1 GB" } } })],
  ["a negative quantity", withSpec({ resources: { requests: { cpu: "-1" } } })],
  ["threads 0", withSpec({ runtime: { threads: 0 } })],
  ["an unknown zero-shot method", withSpec({ runtime: { zeroShotMethod: "magic" } })],
  ["a hypothesis without {}", withSpec({ runtime: { hypothesisTemplate: "This is about it." } })],
  ["steepness 0 (exclusive minimum)", withSpec({ runtime: { similaritySteepness: 0 } })],
  ["midpoint past 1", withSpec({ runtime: { similarityMidpoint: 1.5 } })],
  ["timeoutSeconds 0", withSpec({ timeoutSeconds: 0 })],
  ["no routes", withSpec({ routes: [] })],
  ["an unknown route", withSpec({ routes: ["grpc"] })],
  ["pricing without a service slug", withSpec({ pricing: { currency: "USD" } })],
  ["a lower-case currency", withSpec({ pricing: { serviceSlug: "s", currency: "usd" } })],
  ["a batch discount over 1", withSpec({ pricing: { serviceSlug: "s", batchDiscount: "1.5" } })],
  [
    "a price with two dots",
    withSpec({ pricing: { serviceSlug: "s", outputPerMillionTokens: "1.2.3" } }),
  ],
  [
    "a condition status outside True/False/Unknown",
    model(minimalSpec, {
      status: {
        conditions: [
          { type: "Ready", status: "Maybe", reason: "r", message: "m", lastTransitionTime: "t" },
        ],
      },
    }),
  ],
];
