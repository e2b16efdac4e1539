import type { Child } from "./child-process.js";
import {
  runClosedLoop,
  type LoadPoint,
  type LoadRequest,
  type LoadRun,
} from "../support/closed-loop.js";
import { quantile } from "../runtime/stats.js";

/**
 * One side of a point (direct or through the gateway): one or more load runs
 * merged, with the CPU every process used while they ran. CPU is given as a
 * share of one core (100% = one core busy), so on 2 cores the shares of all
 * processes add up to at most 200%.
 */
export interface Side {
  completed: number;
  failed: number;
  elapsedMs: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** By process name ("client" is this process), as a share of one core. */
  cpuShare: Record<string, number>;
  /** By process name, CPU milliseconds per completed request. */
  cpuMsPerRequest: Record<string, number>;
  firstFailure: string | null;
}

export interface Part {
  run: LoadRun;
  cpuSeconds: Record<string, number>;
}

/** Polling step and bounds of the wait for background work to end. */
const QUIET_STEP_MS = 200;
/** At most one clock tick of /proc accounting per step (5% of a core): as good as idle. */
const QUIET_CPU_SECONDS = 0.01;

/**
 * A load run with the CPU seconds each watched child and this process used
 * during it. After the last answer the gateway still has work to do: its
 * outbox delivers the usage records to the sink and journals the acks. So
 * the CPU reading waits until the `background` processes go quiet (bounded),
 * which charges that work to the run that caused it instead of to the next
 * run, possibly a direct one. Times and rates count only the load itself.
 */
export async function measuredRun(
  origin: string,
  requests: readonly LoadRequest[],
  point: LoadPoint,
  watched: readonly Child[],
  background: { children: readonly Child[]; maxMs: number } = { children: [], maxMs: 0 },
): Promise<Part> {
  const before = await Promise.all(watched.map((c) => c.cpuSeconds()));
  const run = await runClosedLoop(origin, requests, point);
  await whenQuiet(background.children, background.maxMs);
  const after = await Promise.all(watched.map((c) => c.cpuSeconds()));
  const cpuSeconds: Record<string, number> = { client: run.clientCpuSeconds };
  watched.forEach((c, i) => (cpuSeconds[c.name] = after[i]! - before[i]!));
  return { run, cpuSeconds };
}

export async function whenQuiet(children: readonly Child[], maxMs: number): Promise<void> {
  if (children.length === 0) return;
  const total = async () =>
    (await Promise.all(children.map((c) => c.cpuSeconds()))).reduce((a, b) => a + b, 0);
  const deadline = performance.now() + maxMs;
  let last = await total();
  while (performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, QUIET_STEP_MS));
    const now = await total();
    if (!(now - last > QUIET_CPU_SECONDS)) return;
    last = now;
  }
}

/**
 * Merges the halves of one side: counts and times add up, quantiles over all
 * samples. `cpuOverride` replaces the summed CPU seconds of some processes
 * (compare.ts charges the gateway side with all its background work).
 */
export function mergeParts(parts: readonly Part[], cpuOverride: Record<string, number> = {}): Side {
  const latencies = parts.flatMap((p) => p.run.latenciesMs);
  const elapsedMs = parts.reduce((sum, p) => sum + p.run.elapsedMs, 0);
  const cpu: Record<string, number> = {};
  for (const part of parts) {
    for (const [name, seconds] of Object.entries(part.cpuSeconds))
      cpu[name] = (cpu[name] ?? 0) + seconds;
  }
  Object.assign(cpu, cpuOverride);
  const cpuShare: Record<string, number> = {};
  const cpuMsPerRequest: Record<string, number> = {};
  for (const [name, seconds] of Object.entries(cpu)) {
    cpuShare[name] = seconds / (elapsedMs / 1000);
    cpuMsPerRequest[name] = (seconds * 1000) / Math.max(latencies.length, 1);
  }
  return {
    completed: latencies.length,
    failed: parts.reduce((sum, p) => sum + p.run.failed, 0),
    elapsedMs,
    requestsPerSecond: (latencies.length / elapsedMs) * 1000,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    cpuShare,
    cpuMsPerRequest,
    firstFailure: parts.find((p) => p.run.firstFailure)?.run.firstFailure ?? null,
  };
}
