import type {
  V1ContainerStatus,
  V1Deployment,
  V1DeploymentStatus,
  V1Pod,
} from "@kubernetes/client-node";
import {
  CONDITION_ORDER,
  type Condition,
  type ConditionReason,
  type ConditionType,
} from "../crds/conditions.js";
import type { InferenceModel, InferenceModelStatus } from "../crds/inference-model.js";
import { FETCH_CONTAINER, RUNTIME_CONTAINER } from "./children/deployment.js";
import { selectorString } from "./children/labels.js";
import { generationOf } from "./children/owner.js";
import { serviceEndpoint } from "./children/service.js";
import type { SpecVerdict } from "./spec-check.js";

/**
 * An InferenceModel's status as a pure function of the spec check's verdict
 * (operator/spec-check.ts: the parsed model, or why it cannot be applied) and
 * what the operator observed of its children. No clock is read (`now` is an
 * argument) and a condition keeps its lastTransitionTime while its status
 * stays the same, so two passes over an unchanged world give equal statuses
 * and the controller can skip the write.
 *
 * Degraded says something is wrong, Progressing that a rollout is under way,
 * and Ready, derived from both and the replica counts, whether the model
 * answers: it stays True while pods of an earlier spec serve (during a
 * rollout, a stalled one, or after an edit that cannot be applied), because
 * the gateway routes on it and a bad edit must not take a serving model away.
 */
export interface ObservedDeployment {
  /** metadata.generation, to tell whether the Deployment controller saw the latest template. */
  generation?: number;
  /** spec.replicas: ours, or the HPA's choice. */
  desiredReplicas?: number;
  status?: V1DeploymentStatus;
}

export interface Observed {
  /** Absent until the Deployment exists (or the informer has seen it). */
  deployment?: ObservedDeployment;
  /** Ready addresses of the Service (EndpointSlices); when absent, the Deployment's available replicas. */
  endpointsReady?: number;
  /** The model's pods, to explain a rollout that does not progress. */
  pods?: readonly V1Pod[];
}

export type ModelStatus = Omit<InferenceModelStatus, "conditions"> & { conditions: Condition[] };
type Verdict = Omit<Condition, "type" | "observedGeneration" | "lastTransitionTime">;

export function observeDeployment(deployment: V1Deployment): ObservedDeployment {
  const out: ObservedDeployment = {};
  if (deployment.metadata?.generation !== undefined)
    out.generation = deployment.metadata.generation;
  if (deployment.spec?.replicas !== undefined) out.desiredReplicas = deployment.spec.replicas;
  if (deployment.status) out.status = deployment.status;
  return out;
}

export function computeStatus(
  verdict: SpecVerdict,
  observed: Observed,
  now: string,
  previous: InferenceModelStatus | undefined = verdict.status,
): ModelStatus {
  const model = verdict.ref;
  const generation = generationOf(model);
  const verdicts = judge(verdict, observed);
  const conditions = CONDITION_ORDER.map((type): Condition => {
    const verdict = verdicts[type];
    const before = previous?.conditions?.find((c) => c.type === type);
    return {
      type,
      ...verdict,
      ...(generation === undefined ? {} : { observedGeneration: generation }),
      lastTransitionTime:
        before && before.status === verdict.status ? before.lastTransitionTime : now,
    };
  });
  const status: ModelStatus = {
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    conditions,
    replicas: observed.deployment?.status?.replicas ?? 0,
    readyReplicas: observed.deployment?.status?.readyReplicas ?? 0,
    selector: selectorString(model),
  };
  const endpoint = serviceEndpoint(model);
  if (endpoint !== undefined) status.endpoint = endpoint;
  return status;
}

function judge(spec: SpecVerdict, observed: Observed): Record<ConditionType, Verdict> {
  const invalid = spec.valid ? undefined : spec.problems.join("; ");
  const deployment = observed.deployment;
  const st = deployment?.status ?? {};
  // A spec that fails the schema says nothing about replicas; then only the
  // Deployment of an earlier spec can.
  const desired = deployment?.desiredReplicas ?? (spec.model ? desiredFromSpec(spec.model) : 0);
  const available = observed.endpointsReady ?? st.availableReplicas ?? 0;
  const stalled = stalledRollout(st);

  const degraded: Verdict =
    invalid !== undefined
      ? { status: "True", reason: "InvalidSpec", message: invalid }
      : (podFailure(observed.pods ?? []) ??
        (stalled === undefined
          ? { status: "False", reason: "AsExpected", message: "" }
          : { status: "True", reason: "RolloutStalled", message: stalled }));

  let progressing: Verdict;
  if (invalid !== undefined) {
    // The controller does not apply a spec that cannot work: nothing moves.
    progressing = {
      status: "False",
      reason: "InvalidSpec",
      message: "the spec is not applied (see Degraded)",
    };
  } else if (!deployment) {
    progressing = { status: "True", reason: "RollingOut", message: "creating the Deployment" };
  } else if (stalled) {
    progressing = { status: "False", reason: "RolloutStalled", message: stalled };
  } else if (rolloutIncomplete(deployment, desired)) {
    const updated = st.updatedReplicas ?? 0;
    progressing = {
      status: "True",
      reason: "RollingOut",
      message: `${updated} of ${desired} replicas updated, ${st.availableReplicas ?? 0} available`,
    };
  } else if (desired === 0) {
    progressing = { status: "False", reason: "ScaledToZero", message: "no replica is asked for" };
  } else {
    progressing = { status: "False", reason: "Available", message: "rollout complete" };
  }

  let ready: Verdict;
  if (available > 0) {
    // Pods of the previous spec still answer during a rollout, a stalled
    // one, or after an edit that cannot be applied: the model is served.
    const note = invalid !== undefined ? "; the latest spec is not applied (see Degraded)" : "";
    ready = {
      status: "True",
      reason: "Available",
      message: `${available} of ${desired} replicas ready${note}`,
    };
  } else if (progressing.reason === "ScaledToZero") {
    ready = { status: "False", reason: "ScaledToZero", message: "spec.replicas is 0" };
  } else if (degraded.status === "True") {
    ready = { status: "False", reason: degraded.reason, message: degraded.message };
  } else {
    ready = {
      status: "False",
      reason: "RollingOut",
      message: "waiting for a replica to become ready",
    };
  }
  return { Ready: ready, Progressing: progressing, Degraded: degraded };
}

function desiredFromSpec(model: InferenceModel): number {
  return model.spec.autoscaling ? model.spec.autoscaling.minReplicas : model.spec.replicas;
}

function rolloutIncomplete(deployment: ObservedDeployment, desired: number): boolean {
  const st = deployment.status ?? {};
  const seen = st.observedGeneration ?? 0;
  if (deployment.generation !== undefined && seen < deployment.generation) return true;
  const replicas = st.replicas ?? 0;
  return (
    (st.updatedReplicas ?? 0) < desired ||
    replicas > (st.updatedReplicas ?? 0) ||
    replicas > desired ||
    (st.availableReplicas ?? 0) < desired
  );
}

/** The Deployment's own verdict that it stopped: deadline exceeded, or pods it cannot create. */
function stalledRollout(st: V1DeploymentStatus): string | undefined {
  for (const c of st.conditions ?? []) {
    if (
      c.type === "Progressing" &&
      c.status === "False" &&
      c.reason === "ProgressDeadlineExceeded"
    ) {
      return `the rollout exceeded its progress deadline: ${c.message ?? ""}`.trim();
    }
    if (c.type === "ReplicaFailure" && c.status === "True") {
      return `pods cannot be created: ${c.message ?? c.reason ?? ""}`.trim();
    }
  }
  return undefined;
}

/** Waiting reasons that mean the container will not start without a change. */
const STUCK = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerConfigError",
  "CreateContainerError",
]);

/**
 * The first failing pod, by name so the message does not flicker between
 * reconciles: a failed fetch (the init container's last log line, which
 * FallbackToLogsOnError put in its termination message), or a runtime that
 * cannot start or keeps exiting.
 */
export function podFailure(pods: readonly V1Pod[]): Verdict | undefined {
  const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
  live.sort((a, b) => ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1));
  for (const pod of live) {
    const name = pod.metadata?.name ?? "?";
    const statuses = [
      ...(pod.status?.initContainerStatuses ?? []),
      ...(pod.status?.containerStatuses ?? []),
    ];
    for (const cs of statuses) {
      const failure = containerFailure(cs);
      if (!failure) continue;
      const reason: ConditionReason =
        cs.name === FETCH_CONTAINER && !failure.stuck ? "FetchFailed" : "RuntimeFailed";
      const what =
        cs.name === FETCH_CONTAINER && !failure.stuck
          ? "model fetch failed"
          : `container ${cs.name}`;
      return { status: "True", reason, message: `pod ${name}: ${what}: ${failure.detail}` };
    }
  }
  return undefined;
}

function containerFailure(cs: V1ContainerStatus): { stuck: boolean; detail: string } | undefined {
  const waiting = cs.state?.waiting;
  if (waiting?.reason && STUCK.has(waiting.reason)) {
    return { stuck: true, detail: `${waiting.reason}: ${waiting.message ?? ""}`.trim() };
  }
  if (cs.state?.running) return undefined;
  // A container in back-off shows its last exit in lastState; one merely
  // being recreated after a single failure is not reported yet.
  const backOff = waiting?.reason === "CrashLoopBackOff";
  const terminated = cs.state?.terminated ?? (backOff ? cs.lastState?.terminated : undefined);
  if (!terminated || terminated.exitCode === 0) return undefined;
  if (cs.name !== FETCH_CONTAINER && cs.name !== RUNTIME_CONTAINER) return undefined;
  const line = lastLine(terminated.message) ?? terminated.reason ?? "no message";
  return { stuck: false, detail: `exit code ${terminated.exitCode}: ${line}` };
}

function lastLine(text: string | undefined): string | undefined {
  const lines = (text ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  const last = lines.at(-1);
  return last === undefined ? undefined : last.slice(0, 512);
}
