import type { V1Probe } from "@kubernetes/client-node";

/**
 * The kubelet's probe bookkeeping as a pure function: a result flips only
 * after successThreshold consecutive successes or failureThreshold
 * consecutive failures, and the timing fields come with the kubelet's
 * defaults.
 */
export interface ProbeTiming {
  initialDelayMs: number;
  periodMs: number;
  timeoutMs: number;
  successThreshold: number;
  failureThreshold: number;
}

export function probeTiming(probe: V1Probe): ProbeTiming {
  return {
    initialDelayMs: (probe.initialDelaySeconds ?? 0) * 1000,
    periodMs: Math.max(1, probe.periodSeconds ?? 10) * 1000,
    timeoutMs: Math.max(1, probe.timeoutSeconds ?? 1) * 1000,
    successThreshold: Math.max(1, probe.successThreshold ?? 1),
    failureThreshold: Math.max(1, probe.failureThreshold ?? 3),
  };
}

export type ProbeResult = "unknown" | "success" | "failure";

export interface ProbeState {
  result: ProbeResult;
  successes: number;
  failures: number;
}

/**
 * Readiness starts as failure (not ready until proven), liveness and startup
 * as unknown (the kubelet treats a not-yet-probed container as alive).
 */
export function initialProbeState(result: ProbeResult): ProbeState {
  return { result, successes: 0, failures: 0 };
}

export function observeProbe(state: ProbeState, ok: boolean, timing: ProbeTiming): ProbeState {
  if (ok) {
    const successes = state.successes + 1;
    const result = successes >= timing.successThreshold ? "success" : state.result;
    return { result, successes, failures: 0 };
  }
  const failures = state.failures + 1;
  const result = failures >= timing.failureThreshold ? "failure" : state.result;
  return { result, successes: 0, failures };
}
