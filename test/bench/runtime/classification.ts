import type { BenchPlan } from "./plan.js";
import { longBodies, shortBodies } from "./classification-inputs.js";
import { runClosedLoop, type LoadResult } from "./http-load.js";
import { startRuntimeProcess, type Memory, type RuntimeProcess } from "./runtime-process.js";
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

/** One model's points; each point runs once with batching on and once off. */
export interface Suite {
  model: string;
  path: string;
  pointMs: number;
  points: Array<{ input: "short" | "long"; clients: number }>;
}

/** Resident memory of the batching-on runtime: loaded and idle, then after the last point. */
export interface SuiteMemory {
  model: string;
  idle: Memory;
  after: Memory;
}

export interface ClassificationRun {
  points: ClassificationPoint[];
  memory: SuiteMemory[];
}

export async function measureClassification(
  plan: BenchPlan,
  suites: readonly Suite[],
  log: (line: string) => void,
): Promise<ClassificationRun> {
  const run: ClassificationRun = { points: [], memory: [] };
  for (const suite of suites) {
    const { points, memory } = await measureSuite(plan, suite, log);
    run.points.push(...points);
    run.memory.push(memory);
  }
  return run;
}

async function measureSuite(
  plan: BenchPlan,
  suite: Suite,
  log: (line: string) => void,
): Promise<{ points: ClassificationPoint[]; memory: SuiteMemory }> {
  const c = plan.classification;
  const runtimes: Partial<Record<BatchMode, RuntimeProcess>> = {};
  const points: ClassificationPoint[] = [];
  let idle: Memory = { rssMb: Number.NaN, peakMb: Number.NaN };
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
    idle = await runtimes.on!.memory();
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
    const memory = { model: suite.model, idle, after: await runtimes.on!.memory() };
    return { points, memory };
  } finally {
    await Promise.all(Object.values(runtimes).map((r) => r.stop()));
  }
}
