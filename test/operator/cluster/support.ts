import {
  ApiException,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import {
  API_VERSION,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
  type InferenceModelStatus,
} from "../../../crds/inference-model.js";
import { eventually, serverSideApply } from "../../support/cluster.js";

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
export async function rejection(kc: KubeConfig, model: Obj): Promise<string | null> {
  try {
    await serverSideApply(kc, model);
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
