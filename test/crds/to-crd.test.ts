import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import type { SchemaNode } from "../../crds/structural-schema.js";
import { CRD_NAME, inferenceModelCrd, inferenceModelOpenApiSchema } from "../../crds/to-crd.js";
import { toAjvSchema } from "./kube-validator.js";

/**
 * The generated schema obeys the structural-schema rules the API server
 * enforces on an apiextensions.k8s.io/v1 CRD, and the CRD's paths (scale,
 * printer columns) point at fields the schema has.
 */
const schema = inferenceModelOpenApiSchema();

type Visit = { node: SchemaNode; path: string };
function nodes(node: SchemaNode, path = ""): Visit[] {
  const out: Visit[] = [{ node, path }];
  const props = (node.properties ?? {}) as Record<string, SchemaNode>;
  for (const [name, child] of Object.entries(props)) out.push(...nodes(child, `${path}.${name}`));
  if (node.items) out.push(...nodes(node.items as SchemaNode, `${path}[*]`));
  if (typeof node.additionalProperties === "object") {
    out.push(...nodes(node.additionalProperties as SchemaNode, `${path}.*`));
  }
  return out;
}

const FORBIDDEN = [
  "$ref",
  "$schema",
  "$defs",
  "definitions",
  "id",
  "anyOf",
  "oneOf",
  "allOf",
  "not",
  "patternProperties",
  "dependencies",
  "additionalItems",
  "const",
  "examples",
];

describe("the generated openAPIV3Schema is structural", () => {
  it.each(nodes(schema).map((v) => [v.path || "<root>", v.node] as const))("%s", (path, node) => {
    const typed = typeof node.type === "string" && node.type !== "null";
    expect(typed || node["x-kubernetes-preserve-unknown-fields"] === true, "has a type").toBe(true);
    expect(Object.keys(node).filter((k) => FORBIDDEN.includes(k))).toEqual([]);
    if (node.properties) expect(node.additionalProperties).toBeUndefined();
    if (node.properties) expect(node.type).toBe("object");
    if (node.items) expect(node.type).toBe("array");
    expect(node.uniqueItems).toBeUndefined();
    if (path === ".metadata") {
      expect(Object.keys(node.properties as object), "only name may be restricted").toEqual([
        "name",
      ]);
    }
  });

  it("keeps defaults that validate against their own node (as the API server requires)", () => {
    const withDefaults = nodes(schema).filter((v) => "default" in v.node);
    expect(withDefaults.map((v) => v.path)).toEqual(
      expect.arrayContaining([
        ".spec.overflow",
        ".spec.replicas",
        ".spec.routes",
        ".spec.autoscaling.minReplicas",
      ]),
    );
    const ajv = new Ajv({ strict: true });
    for (const { node, path } of withDefaults) {
      expect(ajv.validate(toAjvSchema(node), node.default), path).toBe(true);
    }
  });

  it("drops zod's Number.MAX_SAFE_INTEGER bounds on integers", () => {
    for (const { node } of nodes(schema)) {
      expect(node.maximum).not.toBe(Number.MAX_SAFE_INTEGER);
      expect(node.minimum).not.toBe(-Number.MAX_SAFE_INTEGER);
    }
  });
});

/** The schema node at a JSONPath like .status.conditions[?(@.type=="Ready")].status. */
function at(jsonPath: string): SchemaNode | undefined {
  let node: SchemaNode | undefined = schema;
  for (const part of jsonPath
    .replace(/\[[^\]]*\]/g, ".[]")
    .split(".")
    .slice(1)) {
    if (part === "[]") node = node?.items as SchemaNode | undefined;
    else node = (node?.properties as Record<string, SchemaNode> | undefined)?.[part];
  }
  return node;
}

describe("the CustomResourceDefinition", () => {
  const crd = inferenceModelCrd() as {
    metadata: { name: string };
    spec: { names: Record<string, unknown>; scope: string; versions: Record<string, unknown>[] };
  };
  const [version] = crd.spec.versions;
  const subresources = version?.subresources as { scale: Record<string, string> };
  const columns = version?.additionalPrinterColumns as {
    name: string;
    type: string;
    jsonPath: string;
  }[];

  it("names the resource as ARCHITECTURE.md section 3 does", () => {
    expect(crd.metadata.name).toBe(CRD_NAME);
    expect(CRD_NAME).toBe("inferencemodels.serving.modelgate.dev");
    expect(crd.spec.scope).toBe("Namespaced");
    expect(crd.spec.names).toMatchObject({
      kind: "InferenceModel",
      plural: "inferencemodels",
      singular: "inferencemodel",
      shortNames: ["im"],
    });
    expect(version).toMatchObject({ name: "v1alpha1", served: true, storage: true });
  });

  it("points scale at integer replicas and a string selector", () => {
    expect(at(subresources.scale.specReplicasPath ?? "")?.type).toBe("integer");
    expect(at(subresources.scale.statusReplicasPath ?? "")?.type).toBe("integer");
    expect(at(subresources.scale.labelSelectorPath ?? "")?.type).toBe("string");
  });

  it.each(columns.filter((c) => !c.jsonPath.startsWith(".metadata")))(
    "column $name reads a $type field the schema has",
    ({ type, jsonPath }) => {
      expect(at(jsonPath)?.type).toBe(type);
    },
  );
});
