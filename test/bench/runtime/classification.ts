import type { BenchPlan } from "./plan.js";
import { longBodies, shortBodies } from "./classification-inputs.js";
import { runClosedLoop, type LoadResult } from "./http-load.js";
import { startRuntimeProcess, type RuntimeProcess } from "./runtime-process.js";
import { fmt } from "./stats.js";

/**
 * (a) Classification requests per second over HTTP, batching on and off.
 * Both runtimes (on and off) are started first and stay idle while the other
 * is measured; the points alternate on, off, on, off, so that a slow drift of
 * the machine (another tenant, a warmer CPU) lands on both sides of a ratio.
 */
export type BatchMode = "on" | "off";

export interface ClassificationPoint {
  model: string;
  input: "short" | "long";
  clients: number;
  mode: BatchMode;
  result: LoadResult;
  /** CPU seconds the runtime child used during the point. */
  serverCpuSeconds: number;
}

interface Suite {
  model: string;
  path: string;
  pointMs: number;
  points: Array<{ input: "short" | "long"; clients: number }>;
}

export async function measureClassification(
  plan: BenchPlan,
  nliPath: string,
  log: (line: string) => void,
): Promise<ClassificationPoint[]> {
  const c = plan.classification;
  const suites: Suite[] = [
    {
      model: "tiny-nli",
      path: nliPath,
      pointMs: c.pointMs,
      points: [
        ...c.clients.map((clients) => ({ input: "short" as const, clients })),
        ...c.longClients.map((clients) => ({ input: "long" as const, clients })),
      ],
    },
  ];
  if (c.minilmPath) {
    suites.push({
      model: "all-minilm-l6-v2",
      path: c.minilmPath,
      pointMs: c.minilmPointMs,
      points: c.minilmClients.map((clients) => ({ input: "short" as const, clients })),
    });
  }
  const points: ClassificationPoint[] = [];
  for (const suite of suites) points.push(...(await measureSuite(plan, suite, log)));
  return points;
}

async function measureSuite(
  plan: BenchPlan,
  suite: Suite,
  log: (line: string) => void,
): Promise<ClassificationPoint[]> {
  const c = plan.classification;
  const runtimes: Partial<Record<BatchMode, RuntimeProcess>> = {};
  const points: ClassificationPoint[] = [];
  try {
    for (const mode of ["on", "off"] as const) {
      const throughput = mode === "on" ? c.batchOn : c.batchOff;
      const started = performance.now();
      runtimes[mode] = await startRuntimeProcess({
        path: suite.path,
        modelId: suite.model,
        threads: plan.threads,
        throughput,
      });
      log(
        `classification ${suite.model}: runtime batching ${mode} (maxBatchSize=${throughput.maxBatchSize}, ` +
          `batchWindowMs=${throughput.batchWindowMs}) ready in ${Math.round(performance.now() - started)} ms`,
      );
    }
    const bodies = { short: shortBodies(suite.model), long: longBodies(suite.model) };
    // Warm-up: JIT, connection setup and ORT's first runs at each batch size.
    for (const mode of ["on", "off"] as const) {
      await runClosedLoop(runtimes[mode]!.url, bodies.short, {
        clients: 32,
        durationMs: c.warmupMs,
        maxRequests: c.pointMaxRequests,
      });
    }
    for (const { input, clients } of suite.points) {
      for (const mode of ["on", "off"] as const) {
        const runtime = runtimes[mode]!;
        const cpuBefore = await runtime.cpuSeconds();
        const result = await runClosedLoop(runtime.url, bodies[input], {
          clients,
          durationMs: suite.pointMs,
          maxRequests: c.pointMaxRequests,
        });
        const serverCpuSeconds = (await runtime.cpuSeconds()) - cpuBefore;
        points.push({ model: suite.model, input, clients, mode, result, serverCpuSeconds });
        const seconds = result.elapsedMs / 1000;
        log(
          `classification ${suite.model} ${input} clients=${clients} batching=${mode}: ` +
            `${fmt(result.requestsPerSecond)} req/s (${result.completed} ok, ${result.failed} failed, ` +
            `p50 ${fmt(result.p50Ms)} ms, p99 ${fmt(result.p99Ms)} ms; cpu server ` +
            `${fmt((serverCpuSeconds / seconds) * 100)}% client ${fmt((result.clientCpuSeconds / seconds) * 100)}%)` +
            (result.firstFailure ? ` first failure: ${result.firstFailure}` : ""),
        );
      }
    }
  } finally {
    await Promise.all(Object.values(runtimes).map((r) => r.stop()));
  }
  return points;
}
