import { Pool } from "undici";

/**
 * The benchmarks' closed-loop load generator: `clients` workers, each with
 * its own keep-alive connection, send the next request as soon as the last
 * answer is read; each request has its own path and headers (an API key, a
 * payment signature). It runs in the benchmark's parent process, so it never
 * shares an event loop with a server under test, only the machine's cores.
 * Bounded by a request count and a deadline, whichever comes first; a stuck
 * server is bounded by the pool's timeouts. The raw latencies are returned so
 * that the halves of an A-B-B-A point can be merged before taking quantiles.
 */
export interface LoadRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface LoadPoint {
  clients: number;
  durationMs: number;
  maxRequests: number;
}

export interface LoadRun {
  completed: number;
  failed: number;
  elapsedMs: number;
  latenciesMs: number[];
  /** CPU seconds of this (the parent) process during the run: the client's share. */
  clientCpuSeconds: number;
  firstFailure: string | null;
}

const TIMEOUT_MS = 10_000;

export async function runClosedLoop(
  origin: string,
  requests: readonly LoadRequest[],
  point: LoadPoint,
): Promise<LoadRun> {
  const pool = new Pool(origin, {
    connections: point.clients,
    pipelining: 1,
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
  });
  const latenciesMs: number[] = [];
  let issued = 0;
  let failed = 0;
  let firstFailure: string | null = null;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + point.durationMs;

  async function worker(): Promise<void> {
    while (issued < point.maxRequests && performance.now() < deadline) {
      const request = requests[issued % requests.length]!;
      issued++;
      const sent = performance.now();
      try {
        const response = await pool.request({
          path: request.path,
          method: "POST",
          headers: request.headers,
          body: request.body,
        });
        const text = await response.body.text();
        if (response.statusCode === 200) {
          latenciesMs.push(performance.now() - sent);
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
    completed: latenciesMs.length,
    failed,
    elapsedMs,
    latenciesMs,
    clientCpuSeconds: (cpu.user + cpu.system) / 1e6,
    firstFailure,
  };
}
