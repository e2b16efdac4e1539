import type { V1EndpointSlice } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { registrySourceOf, gatewayConfigSchema } from "../../../gateway/config.js";
import { ClusterIndex, sameRoutable } from "../../../gateway/registry/cluster-index.js";
import { parseInferenceModel } from "../../../gateway/registry/parse-model.js";
import type { InferenceModel } from "../../../crds/inference-model.js";

function model(name: string, namespace = "ns", spec: Record<string, unknown> = {}): InferenceModel {
  const parsed = parseInferenceModel({
    apiVersion: "serving.modelgate.dev/v1alpha1",
    kind: "InferenceModel",
    metadata: { name, namespace },
    spec: { task: "text-generation", source: { uri: "file:///m" }, ...spec },
  });
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.model;
}

function slice(
  name: string,
  service: string,
  addresses: string[],
  namespace = "ns",
): V1EndpointSlice {
  return {
    addressType: "IPv4",
    metadata: { name, namespace, labels: { "kubernetes.io/service-name": service } },
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
    ports: [{ name: "http", port: 8080 }],
  };
}

describe("ClusterIndex", () => {
  it("joins a model with its Service's slices, whichever arrives first", () => {
    const index = new ClusterIndex();
    expect(index.setSlice(slice("alpha-x", "alpha", ["10.250.0.1"]))).toEqual([]);
    expect(index.setModel(model("alpha"))).toEqual(["ns/alpha"]);
    expect(index.routable("ns/alpha")?.endpoints).toEqual(["http://10.250.0.1:8080"]);
    expect(index.setSlice(slice("alpha-y", "alpha", ["10.250.0.2"]))).toEqual(["ns/alpha"]);
    expect(index.routable("ns/alpha")?.endpoints).toEqual([
      "http://10.250.0.1:8080",
      "http://10.250.0.2:8080",
    ]);
    expect(index.deleteSlice(slice("alpha-x", "alpha", []))).toEqual(["ns/alpha"]);
    expect(index.routable("ns/alpha")?.endpoints).toEqual(["http://10.250.0.2:8080"]);
    expect(index.deleteModel("ns/alpha")).toEqual(["ns/alpha"]);
    expect(index.routable("ns/alpha")).toBeUndefined();
  });

  it("matches slices by namespace and by the operator's Service name", () => {
    const index = new ClusterIndex();
    index.setModel(model("7b-chat"));
    index.setModel(model("alpha", "other"));
    expect(index.setSlice(slice("s1", "im-7b-chat", ["10.250.0.1"]))).toEqual(["ns/7b-chat"]);
    expect(index.setSlice(slice("s2", "alpha", ["10.250.0.2"]))).toEqual([]);
    expect(index.routable("ns/7b-chat")?.endpoints).toEqual(["http://10.250.0.1:8080"]);
    expect(index.routable("other/alpha")?.endpoints).toEqual([]);
  });

  it("moves a slice whose service-name label changes, recomputing both models", () => {
    const index = new ClusterIndex();
    index.setModel(model("a"));
    index.setModel(model("b"));
    index.setSlice(slice("s", "a", ["10.250.0.1"]));
    expect(index.setSlice(slice("s", "b", ["10.250.0.1"])).sort()).toEqual(["ns/a", "ns/b"]);
    expect(index.routable("ns/a")?.endpoints).toEqual([]);
    expect(index.routable("ns/b")?.endpoints).toEqual(["http://10.250.0.1:8080"]);
  });

  it("keeps a model's slices across a spec change", () => {
    const index = new ClusterIndex();
    index.setModel(model("a"));
    index.setSlice(slice("s", "a", ["10.250.0.1"]));
    index.setModel(model("a", "ns", { routes: ["pay"] }));
    expect(index.routable("ns/a")).toMatchObject({
      routes: new Set(["pay"]),
      endpoints: ["http://10.250.0.1:8080"],
    });
  });
});

describe("sameRoutable", () => {
  it("compares routes and endpoints by content", () => {
    const index = new ClusterIndex();
    index.setModel(model("a"));
    const first = index.routable("ns/a");
    index.setModel(model("a"));
    expect(sameRoutable(first, index.routable("ns/a"))).toBe(true);
    index.setSlice(slice("s", "a", ["10.250.0.1"]));
    expect(sameRoutable(first, index.routable("ns/a"))).toBe(false);
    index.setModel(model("a", "ns", { routes: ["pay"] }));
    expect(sameRoutable(first, undefined)).toBe(false);
    expect(sameRoutable(undefined, undefined)).toBe(true);
  });
});

describe("parseInferenceModel", () => {
  it("names the field of an object the schema rejects", () => {
    // The CRD takes any int64 here; zod's int() stops at 2^53.
    const result = parseInferenceModel({
      apiVersion: "serving.modelgate.dev/v1alpha1",
      kind: "InferenceModel",
      metadata: { name: "x", namespace: "ns" },
      spec: {
        task: "text-generation",
        source: { uri: "file:///m" },
        scheduling: { tolerations: [{ key: "k", tolerationSeconds: 2 ** 60 }] },
      },
    });
    expect(result).toMatchObject({
      ok: false,
      field: "spec.scheduling.tolerations.0.tolerationSeconds",
    });
  });
});

describe("registrySourceOf", () => {
  const config = (settings: Record<string, unknown>) => gatewayConfigSchema.parse(settings);

  it("defaults to files with --models-dir, else to the cluster", () => {
    expect(registrySourceOf(config({ modelsDir: "m" }))).toEqual({ kind: "file", dir: "m" });
    expect(registrySourceOf(config({}))).toEqual({
      kind: "kubernetes",
      kubeconfig: undefined,
      namespace: undefined,
    });
    expect(
      registrySourceOf(
        config({ modelsDir: "m", registry: "kubernetes", kubeconfig: "k", watchNamespace: "ns" }),
      ),
    ).toEqual({ kind: "kubernetes", kubeconfig: "k", namespace: "ns" });
  });

  it("refuses a file registry without a folder, and a bad namespace", () => {
    expect(() => registrySourceOf(config({ registry: "file" }))).toThrow(/--models-dir/);
    expect(() => config({ watchNamespace: "Not_A_Namespace" })).toThrow();
    expect(() => config({ registry: "etcd" })).toThrow();
  });
});
