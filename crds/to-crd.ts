import { GROUP, KIND, PLURAL, VERSION, inferenceModelSchema } from "./inference-model.js";
import { toStructuralSchema, type Extensions, type SchemaNode } from "./structural-schema.js";

/**
 * The InferenceModel CustomResourceDefinition, built from the zod schema in
 * inference-model.ts. Only what zod cannot say is written here: the CRD's
 * names, subresources, printer columns, and the CEL twin of each zod refine.
 * The YAML twin is written by generate.ts and checked by `npm run crd:check`.
 */

export const CRD_NAME = `${PLURAL}.${GROUP}`;

/**
 * CEL rules and list types, by path in the resource. Each CEL rule repeats a
 * zod refine (zod functions cannot be translated): generation fails when a
 * refine has no rule here, and test/crds/agreement.test.ts checks that both
 * reject the same objects. Defaults are applied before CEL runs, so
 * minReplicas is always present.
 */
export const CRD_EXTENSIONS: Extensions = {
  "spec.autoscaling": {
    "x-kubernetes-validations": [
      {
        rule: "self.minReplicas <= self.maxReplicas",
        message: "minReplicas must not exceed maxReplicas",
        fieldPath: ".minReplicas",
      },
    ],
  },
  // metav1.Condition's convention: one entry per type, merged by type under server-side apply.
  "status.conditions": {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
  },
};

const PRINTER_COLUMNS = [
  {
    name: "Model",
    type: "string",
    jsonPath: ".spec.model",
    description: "Model id (empty: the name)",
  },
  { name: "Task", type: "string", jsonPath: ".spec.task" },
  { name: "Replicas", type: "integer", jsonPath: ".status.replicas" },
  { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  { name: "Available", type: "integer", jsonPath: ".status.readyReplicas", priority: 1 },
  { name: "Endpoint", type: "string", jsonPath: ".status.endpoint", priority: 1 },
];

/** The openAPIV3Schema: spec and status from zod, the envelope as Kubernetes defines it. */
export function inferenceModelOpenApiSchema(): SchemaNode {
  const root = toStructuralSchema(inferenceModelSchema, CRD_EXTENSIONS);
  const props = root.properties as Record<string, SchemaNode>;
  const name = (props.metadata?.properties as Record<string, SchemaNode> | undefined)?.name;
  if (!props.spec || !props.status || !name) {
    throw new Error("inferenceModelSchema lost spec, status or metadata.name");
  }
  return {
    description: `${KIND} serves one model behind the Modelgate gateway.`,
    type: "object",
    properties: {
      // apiVersion and kind are checked by the API server itself; an enum
      // here would break the day a second version is served.
      apiVersion: { description: "Versioned schema of this object.", type: "string" },
      kind: { description: "The REST resource this object represents.", type: "string" },
      // Kubernetes owns metadata; a CRD may only restrict name (and
      // generateName). The name becomes a Service name: a DNS-1123 label.
      metadata: { type: "object", properties: { name } },
      spec: props.spec,
      status: props.status,
    },
    required: ["spec"],
  };
}

export function inferenceModelCrd(): SchemaNode {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: CRD_NAME },
    spec: {
      group: GROUP,
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: KIND.toLowerCase(),
        shortNames: ["im"],
        categories: ["modelgate"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: inferenceModelOpenApiSchema() },
          subresources: {
            status: {},
            // kubectl scale and an HPA targeting the InferenceModel itself.
            scale: {
              specReplicasPath: ".spec.replicas",
              statusReplicasPath: ".status.replicas",
              labelSelectorPath: ".status.selector",
            },
          },
          additionalPrinterColumns: PRINTER_COLUMNS,
        },
      ],
    },
  };
}
