import type {
  V1ContainerState,
  V1ContainerStatus,
  V1Pod,
  V1PodCondition,
  V1PodStatus,
} from "@kubernetes/client-node";

/**
 * The pod's status as the kubelet would report it, computed from what the
 * agent knows about its processes. Pure: the worker keeps the facts, this
 * turns them into the API's shape, and the writer sends it only when it
 * differs from the last one written.
 */
export type ContainerPhase =
  | { kind: "waiting"; reason: string; message?: string }
  | { kind: "running"; startedAt: string }
  | Terminated;

export interface Terminated {
  kind: "terminated";
  exitCode: number;
  signal?: number;
  reason: string;
  message?: string;
  startedAt: string;
  finishedAt: string;
  containerID?: string;
}

export interface ContainerFacts {
  name: string;
  image: string;
  phase: ContainerPhase;
  lastTermination?: Terminated;
  restartCount: number;
  ready: boolean;
  started: boolean;
  containerID?: string;
}

export interface PodFacts {
  podIP?: string;
  hostIP: string;
  startTime: string;
  initContainers: ContainerFacts[];
  containers: ContainerFacts[];
  /** Every init container has completed successfully. */
  initialized: boolean;
  /** An init container failed under restartPolicy Never: the pod can never run. */
  initFailed: boolean;
}

type RestartPolicy = "Always" | "OnFailure" | "Never";

export function restartPolicyOf(pod: V1Pod): RestartPolicy {
  const policy = pod.spec?.restartPolicy;
  return policy === "OnFailure" || policy === "Never" ? policy : "Always";
}

/** Whether a container that exited with `exitCode` runs again under `policy`. */
export function shouldRestart(policy: RestartPolicy, exitCode: number): boolean {
  return policy === "Always" || (policy === "OnFailure" && exitCode !== 0);
}

export function podPhase(
  facts: PodFacts,
  policy: RestartPolicy,
): NonNullable<V1PodStatus["phase"]> {
  if (facts.initFailed) return "Failed";
  if (!facts.initialized) return "Pending";
  const phases = facts.containers.map((c) => c.phase);
  if (phases.some((p) => p.kind === "running")) return "Running";
  const everStarted = facts.containers.some(
    (c) => c.phase.kind === "terminated" || c.lastTermination,
  );
  if (!everStarted) return "Pending";
  const finished = phases.every((p) => p.kind === "terminated");
  if (!finished || policy === "Always") return "Running";
  const allSucceeded = phases.every((p) => p.kind === "terminated" && p.exitCode === 0);
  if (allSucceeded) return "Succeeded";
  return policy === "Never" ? "Failed" : "Running";
}

/** Condition status and the time it last changed, kept by the worker across writes. */
export type ConditionMemory = Map<string, { status: string; lastTransitionTime: string }>;

export function conditionMemoryFrom(pod: V1Pod): ConditionMemory {
  const memory: ConditionMemory = new Map();
  for (const c of pod.status?.conditions ?? []) {
    memory.set(c.type, { status: c.status, lastTransitionTime: timeString(c.lastTransitionTime) });
  }
  return memory;
}

const OWN_CONDITIONS = ["PodScheduled", "Initialized", "ContainersReady", "Ready"];

export function buildPodStatus(
  pod: V1Pod,
  facts: PodFacts,
  memory: ConditionMemory,
  now: string,
): V1PodStatus {
  const policy = restartPolicyOf(pod);
  const phase = podPhase(facts, policy);
  const containersReady = facts.initialized && facts.containers.every((c) => c.ready);
  const terminal = phase === "Succeeded" || phase === "Failed";
  const wanted: Record<string, { status: boolean; reason?: string }> = {
    PodScheduled: { status: true },
    Initialized: {
      status: facts.initialized,
      ...(facts.initialized ? {} : { reason: "ContainersNotInitialized" }),
    },
    ContainersReady: {
      status: containersReady && !terminal,
      ...(containersReady && !terminal
        ? {}
        : { reason: terminal ? "PodCompleted" : "ContainersNotReady" }),
    },
    Ready: {
      status: containersReady && !terminal,
      ...(containersReady && !terminal
        ? {}
        : { reason: terminal ? "PodCompleted" : "ContainersNotReady" }),
    },
  };
  const conditions: V1PodCondition[] = [];
  // Conditions other writers own (DisruptionTarget, readiness gates) are kept as they are.
  for (const c of pod.status?.conditions ?? []) {
    if (!OWN_CONDITIONS.includes(c.type)) conditions.push(c);
  }
  for (const type of OWN_CONDITIONS) {
    const want = wanted[type]!;
    const status = want.status ? "True" : "False";
    const previous = memory.get(type);
    const lastTransitionTime =
      previous && previous.status === status ? previous.lastTransitionTime : now;
    memory.set(type, { status, lastTransitionTime });
    conditions.push({
      type,
      status,
      lastTransitionTime: new Date(lastTransitionTime),
      ...(want.reason ? { reason: want.reason } : {}),
      ...(type === "ContainersReady" || type === "Ready"
        ? notReadyMessage(facts, want.status)
        : type === "Initialized"
          ? notInitializedMessage(facts)
          : {}),
    });
  }
  const status: V1PodStatus = {
    phase,
    conditions,
    hostIP: facts.hostIP,
    hostIPs: [{ ip: facts.hostIP }],
    startTime: new Date(facts.startTime),
    initContainerStatuses: facts.initContainers.map(containerStatus),
    containerStatuses: facts.containers.map(containerStatus),
  };
  if (facts.podIP !== undefined) {
    status.podIP = facts.podIP;
    status.podIPs = [{ ip: facts.podIP }];
  }
  return status;
}

function notReadyMessage(facts: PodFacts, ready: boolean): Pick<V1PodCondition, "message"> {
  if (ready) return {};
  const names = facts.containers.filter((c) => !c.ready).map((c) => c.name);
  return names.length ? { message: `containers with unready status: [${names.join(" ")}]` } : {};
}

function notInitializedMessage(facts: PodFacts): Pick<V1PodCondition, "message"> {
  if (facts.initialized) return {};
  const names = facts.initContainers
    .filter((c) => !(c.phase.kind === "terminated" && c.phase.exitCode === 0))
    .map((c) => c.name);
  return names.length ? { message: `containers with incomplete status: [${names.join(" ")}]` } : {};
}

function containerStatus(facts: ContainerFacts): V1ContainerStatus {
  const status: V1ContainerStatus = {
    name: facts.name,
    image: facts.image,
    imageID: "",
    ready: facts.ready,
    started: facts.started,
    restartCount: facts.restartCount,
    state: stateOf(facts.phase),
  };
  if (facts.containerID !== undefined) status.containerID = facts.containerID;
  if (facts.lastTermination) status.lastState = stateOf(facts.lastTermination);
  return status;
}

function stateOf(phase: ContainerPhase): V1ContainerState {
  switch (phase.kind) {
    case "waiting":
      return {
        waiting: { reason: phase.reason, ...(phase.message ? { message: phase.message } : {}) },
      };
    case "running":
      return { running: { startedAt: new Date(phase.startedAt) } };
    case "terminated":
      return {
        terminated: {
          exitCode: phase.exitCode,
          ...(phase.signal !== undefined ? { signal: phase.signal } : {}),
          reason: phase.reason,
          ...(phase.message ? { message: phase.message } : {}),
          startedAt: new Date(phase.startedAt),
          finishedAt: new Date(phase.finishedAt),
          ...(phase.containerID ? { containerID: phase.containerID } : {}),
        },
      };
  }
}

/** The API's time format: RFC 3339 in whole seconds. */
export function apiTime(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

function timeString(value: unknown): string {
  if (value instanceof Date) return apiTime(value);
  return typeof value === "string" ? value : apiTime();
}
