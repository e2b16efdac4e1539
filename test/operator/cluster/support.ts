import {
  ApiException,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import {
  API_VERSION,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
  type InferenceModelStatus,
} from "../../../crds/inference-model.js";
import {
  CRD_FILE,
  eventually,
  serverSideApply,
  TEST_FIELD_MANAGER,
  type TestCluster,
} from "../../support/cluster.js";

/** InferenceModel helpers for tests against the cluster. */
export type Obj = KubernetesObject & {
  spec?: Record<string, unknown>;
  status?: InferenceModelStatus;
};
type Condition = NonNullable<InferenceModelStatus["conditions"]>[number];

export function modelObject(namespace: string, name: string, spec: Record<string, unknown>): Obj {
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name, namespace }, spec };
}

export const BASIC_SPEC = {
  task: "zero-shot-classification",
  source: { uri: "hf://org/model@main" },
};

export async function applyModel(kc: KubeConfig, model: Obj): Promise<Obj> {
  return serverSideApply(kc, model);
}

export async function readModel(kc: KubeConfig, namespace: string, name: string): Promise<Obj> {
  const api = kc.makeApiClient(CustomObjectsApi);
  return (await api.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: PLURAL,
    namespace,
    name,
  })) as Obj;
}

export function condition(model: Obj, type: string): Condition | undefined {
  return (model.status?.conditions ?? []).find((c) => c.type === type);
}

/** Waits until the model's condition has the status (and reason, when given). */
export async function waitForCondition(
  kc: KubeConfig,
  namespace: string,
  name: string,
  type: string,
  status: string,
  reason?: string,
  timeoutMs = 30_000,
): Promise<Obj> {
  return eventually(async () => {
    const model = await readModel(kc, namespace, name);
    const c = condition(model, type);
    if (c?.status !== status || (reason !== undefined && c.reason !== reason)) {
      throw new Error(`${name}: ${type} is ${JSON.stringify(c)}, want ${status} ${reason ?? ""}`);
    }
    return model;
  }, timeoutMs);
}

/** The API server's rejection message for an object, or null when it is accepted. */
export async function rejection(
  kc: KubeConfig,
  model: Obj,
  dryRun?: "All",
): Promise<string | null> {
  try {
    if (dryRun === undefined) await serverSideApply(kc, model);
    else
      await KubernetesObjectApi.makeApiClient(kc).patch(
        model,
        undefined,
        dryRun,
        TEST_FIELD_MANAGER,
        true,
        PatchStrategy.ServerSideApply,
      );
    return null;
  } catch (err) {
    if (err instanceof ApiException) {
      const raw: unknown = err.body;
      const body = (typeof raw === "string" ? JSON.parse(raw) : raw) as { message?: string };
      return body?.message ?? err.message;
    }
    throw err;
  }
}

export async function metricsText(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

export function metricValue(text: string, name: string): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      total += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return total;
}

/**
 * Stores `model` although the CRD's schema refuses it, as an object written
 * before the CRD tightened a rule is stored: the CRD is applied with `relax`
 * run on its schema, the object created, and the CRD restored at once. The
 * API server keeps such an object, and (validation ratcheting) still takes
 * writes that leave the refused field as it is, such as the status.
 *
 * The CRD is the cluster's, shared with every test: relax a rule no other
 * test relies on, and the looser CRD lives for the few milliseconds of one
 * create. Resolves once the API server refuses such an object again.
 */
export async function storeUnderLooserSchema(
  cluster: TestCluster,
  relax: (openApiV3Schema: SchemaObject) => void,
  model: Obj,
): Promise<void> {
  const crd = parse(readFileSync(CRD_FILE, "utf8")) as {
    spec: { versions: { schema: { openAPIV3Schema: SchemaObject } }[] };
  };
  relax(crd.spec.versions[0]!.schema.openAPIV3Schema);
  const applyCrd = (yaml: string) =>
    execFileSync(
      join(cluster.binDir, "kubectl"),
      [
        "--kubeconfig",
        cluster.kubeconfigPath,
        "apply",
        "--server-side",
        "--force-conflicts",
        `--field-manager=${TEST_FIELD_MANAGER}`,
        "-f",
        "-",
      ],
      { input: yaml, stdio: ["pipe", "ignore", "inherit"] },
    );
  try {
    applyCrd(stringify(crd));
    // The API server takes the new schema a moment after it accepts the CRD.
    await eventually(() => serverSideApply(cluster.kc, model), 10_000, 20);
  } finally {
    applyCrd(readFileSync(CRD_FILE, "utf8"));
  }
  const twin = { ...model, metadata: { ...model.metadata, name: `${model.metadata!.name}-twin` } };
  await eventually(
    async () => {
      if ((await rejection(cluster.kc, twin, "All")) === null) {
        throw new Error("the API server still takes the looser schema");
      }
    },
    10_000,
    20,
  );
}

export type SchemaObject = { properties?: Record<string, SchemaObject> } & Record<string, unknown>;

/** The schema node at a dotted path of properties, e.g. "spec.source.checksums". */
export function schemaAt(root: SchemaObject, path: string): SchemaObject {
  let node = root;
  for (const key of path.split(".")) {
    const next = node.properties?.[key];
    if (!next) throw new Error(`no property ${key} in the CRD schema at ${path}`);
    node = next;
  }
  return node;
}
