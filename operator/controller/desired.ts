import type { KubernetesObject } from "@kubernetes/client-node";
import type { InferenceModel } from "../../crds/inference-model.js";
import { buildDeployment, type BuildContext } from "../children/deployment.js";
import { buildHpa } from "../children/hpa.js";
import { childNames } from "../../crds/child-names.js";
import { buildPdb } from "../children/pdb.js";
import { buildService } from "../children/service.js";

/**
 * The kinds of children an InferenceModel may have, with what the
 * controller needs to watch, apply and delete them. The order is the apply
 * order (STYLE.md's one writer: Service, Deployment, HPA, PDB); the
 * reconciler's write() says why it matters.
 */
export const CHILD_KINDS = [
  { kind: "Service", apiVersion: "v1", plural: "services", group: "" },
  { kind: "Deployment", apiVersion: "apps/v1", plural: "deployments", group: "apps" },
  {
    kind: "HorizontalPodAutoscaler",
    apiVersion: "autoscaling/v2",
    plural: "horizontalpodautoscalers",
    group: "autoscaling",
  },
  {
    kind: "PodDisruptionBudget",
    apiVersion: "policy/v1",
    plural: "poddisruptionbudgets",
    group: "policy",
  },
] as const;

export type ChildKind = (typeof CHILD_KINDS)[number]["kind"];

export interface ChildRef {
  kind: ChildKind;
  apiVersion: string;
  namespace: string;
  name: string;
}

export interface DesiredChildren {
  /** Objects to server-side apply, in CHILD_KINDS order. */
  apply: KubernetesObject[];
  /** Children that must not exist (an HPA after autoscaling was removed, say). */
  absent: ChildRef[];
}

/**
 * What should exist for a model: a pure function of the model and the
 * operator's settings. The reconciler applies `apply` and deletes `absent`
 * when it sees them; applying the same result twice changes nothing.
 */
export function desiredChildren(model: InferenceModel, ctx: BuildContext): DesiredChildren {
  const namespace = model.metadata.namespace ?? "default";
  const names = childNames(model.metadata.name);
  const hpa = buildHpa(model);
  const pdb = buildPdb(model);
  const apply: KubernetesObject[] = [buildService(model), buildDeployment(model, ctx)];
  const absent: ChildRef[] = [];
  if (hpa) apply.push(hpa);
  else absent.push(ref("HorizontalPodAutoscaler", namespace, names.hpa));
  if (pdb) apply.push(pdb);
  else absent.push(ref("PodDisruptionBudget", namespace, names.pdb));
  return { apply, absent };
}

function ref(kind: ChildKind, namespace: string, name: string): ChildRef {
  const apiVersion = CHILD_KINDS.find((k) => k.kind === kind)!.apiVersion;
  return { kind, apiVersion, namespace, name };
}
