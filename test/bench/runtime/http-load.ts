import { Pool } from "undici";
import { quantile } from "./stats.js";

/**
 * A closed-loop load generator: `clients` workers, each with its own
 * keep-alive connection, send the next request as soon as the last answer
 * arrives. Bounded by both a request count and a deadline, whichever comes
 * first. It runs in the benchmark's parent process, so it never shares an
 * event loop with the runtime; it does share the machine's two cores, and
 * run.ts reports its CPU time next to the server's for that reason.
 */
export interface LoadPoint {
  clients: number;
  durationMs: number;
  maxRequests: number;
}

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

export async function runClosedLoop(
  origin: string,
  bodies: readonly string[],
  point: LoadPoint,
): Promise<LoadResult> {
  const pool = new Pool(origin, { connections: point.clients, pipelining: 1 });
  const latencies: number[] = [];
  let issued = 0;
  let failed = 0;
  let firstFailure: string | null = null;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + point.durationMs;

  async function worker(): Promise<void> {
    while (issued < point.maxRequests && performance.now() < deadline) {
      const body = bodies[issued % bodies.length]!;
      issued++;
      const sent = performance.now();
      try {
        const response = await pool.request({
          path: "/v1/responses",
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        const text = await response.body.text();
        if (response.statusCode === 200) {
          latencies.push(performance.now() - sent);
        } else {
          failed++;
          firstFailure ??= `${response.statusCode} ${text.slice(0, 200)}`;
        }
      } catch (error) {
        failed++;
        firstFailure ??= String(error);
      }
    }
  }

  await Promise.all(Array.from({ length: point.clients }, () => worker()));
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  await pool.close();
  return {
    completed: latencies.length,
    failed,
    elapsedMs,
    requestsPerSecond: (latencies.length / elapsedMs) * 1000,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    clientCpuSeconds: (cpu.user + cpu.system) / 1e6,
    firstFailure,
  };
}
