import { describe, expect, it } from "vitest";
import { buildDeployment, type BuildContext } from "../../../operator/children/deployment.js";
import { SPEC_HASH_ANNOTATION, specHash } from "../../../operator/children/spec-hash.js";
import { makeModel } from "../model-fixture.js";

const CTX: BuildContext = { image: "modelgate:test", imagePullPolicy: "IfNotPresent" };
const BASE = {
  maxTokens: 1024,
  replicas: 2,
  resources: { requests: { cpu: "1" } },
  runtime: { maxQueue: 10 },
  source: { uri: "hf://org/name", checksums: { a: "a".repeat(64), b: "b".repeat(64) } },
};

function templateOf(spec: Record<string, unknown>) {
  return buildDeployment(makeModel({ spec: { ...BASE, ...spec } }), CTX).spec!.template;
}

/** Pods roll exactly when the template changes; the hash must follow the pod-relevant spec. */
describe("the pod template hash", () => {
  const rolls: [string, Record<string, unknown>][] = [
    ["maxTokens", { maxTokens: 2048 }],
    ["overflow", { overflow: "error" }],
    ["model id", { model: "other-id" }],
    ["task", { task: "zero-shot-classification" }],
    ["source uri", { source: { uri: "hf://org/other" } }],
    [
      "a checksum",
      { source: { ...BASE.source, checksums: { a: "c".repeat(64), b: "b".repeat(64) } } },
    ],
    ["resources", { resources: { requests: { cpu: "2" } } }],
    ["runtime tuning", { runtime: { maxQueue: 11 } }],
  ];
  it.each(rolls)("changes when %s changes", (_, change) => {
    const before = templateOf({});
    const after = templateOf(change);
    expect(after.metadata?.annotations?.[SPEC_HASH_ANNOTATION]).not.toBe(
      before.metadata?.annotations?.[SPEC_HASH_ANNOTATION],
    );
  });

  const stays: [string, Record<string, unknown>][] = [
    ["replicas", { replicas: 7 }],
    ["autoscaling", { autoscaling: { maxReplicas: 4 } }],
    ["timeoutSeconds", { timeoutSeconds: 120 }],
    ["routes", { routes: ["pay"] }],
    ["pricing", { pricing: { serviceSlug: "chat", inputPerMillionTokens: "1.5" } }],
    [
      "checksum order",
      { source: { uri: "hf://org/name", checksums: { b: "b".repeat(64), a: "a".repeat(64) } } },
    ],
    ["model set to the object's name", { model: "smollm" }],
  ];
  it.each(stays)("stays, with the whole template, when only %s changes", (_, change) => {
    expect(templateOf(change)).toEqual(templateOf({}));
  });

  it("is 16 hex digits", () => {
    expect(specHash(makeModel())).toMatch(/^[0-9a-f]{16}$/);
  });
});
