import { runClosedLoop as run, type LoadPoint } from "../support/closed-loop.js";
import { quantile } from "./stats.js";

/**
 * The runtime benchmark's load: bodies posted to /v1/responses by the shared
 * closed-loop generator, summarised as throughput and latency quantiles.
 */
export type { LoadPoint };

export interface LoadResult {
  completed: number;
  failed: number;
  elapsedMs: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Seconds of CPU the load generator itself used. */
  clientCpuSeconds: number;
  firstFailure: string | null;
}

const HEADERS = { "content-type": "application/json" };

export async function runClosedLoop(
  origin: string,
  bodies: readonly string[],
  point: LoadPoint,
): Promise<LoadResult> {
  const requests = bodies.map((body) => ({ path: "/v1/responses", headers: HEADERS, body }));
  const result = await run(origin, requests, point);
  return {
    completed: result.completed,
    failed: result.failed,
    elapsedMs: result.elapsedMs,
    requestsPerSecond: (result.completed / result.elapsedMs) * 1000,
    p50Ms: quantile(result.latenciesMs, 0.5),
    p99Ms: quantile(result.latenciesMs, 0.99),
    clientCpuSeconds: result.clientCpuSeconds,
    firstFailure: result.firstFailure,
  };
}
