import { Pool } from "undici";
import { openBareLoop } from "./bare-loop.js";
import { runtimeGenerate } from "./generation-check.js";
import { openPeer, type ChatMessage } from "./peer.js";
import type { BenchPlan, RealPlan } from "./plan.js";
import { SMOLLM } from "./plan.js";
import { startRuntimeProcess, type Memory } from "./runtime-process.js";
import { fmt, quantile } from "./stats.js";

/**
 * Concurrent generation on SmolLM2: N clients each ask for one greedy
 * 64-token answer at the same moment. Our runtime runs once with continuous
 * batching (--generation-concurrency 16: up to 16 sequences per decode step)
 * and once one sequence after another (1); the peer runs N pipeline calls at
 * once in this process, as a service built on it would. Aggregate tokens/s is
 * all tokens made / wall time from the first request to the last answer.
 */
export interface ConcurrentPoint {
  engine: "runtime" | "peer";
  /** The runtime's --generation-concurrency; null for the peer. */
  concurrency: number | null;
  clients: number;
  tokens: number;
  wallMs: number;
  tokensPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

export interface RuntimeMemory {
  concurrency: number;
  idle: Memory;
  /** After each client count, in order. */
  after: Array<{ clients: number; memory: Memory }>;
}

/** In-process decode step of the bare graph: the bound on what batching a step can give. */
export interface StepBound {
  pastLength: number;
  batch: number;
  batch1Ms: number;
  batchMs: number;
}

export interface ConcurrentFigures {
  points: ConcurrentPoint[];
  memory: RuntimeMemory[];
  step: StepBound;
}

export async function measureConcurrentGeneration(
  plan: BenchPlan,
  real: RealPlan,
  messages: ChatMessage[],
  promptTokens: number,
  log: (line: string) => void,
): Promise<ConcurrentFigures> {
  const n = plan.generation.newTokens;
  const points: ConcurrentPoint[] = [];
  const memory: RuntimeMemory[] = [];
  const modes: Array<[number, number[]]> = [
    [real.generationConcurrency, real.batchedClients],
    [1, real.oneByOneClients],
  ];
  for (const [concurrency, clientCounts] of modes) {
    const runtime = await startRuntimeProcess({
      path: real.smollmPath,
      modelId: SMOLLM,
      threads: plan.threads,
      throughput: { generationConcurrency: concurrency },
    });
    try {
      const mem: RuntimeMemory = { concurrency, idle: await runtime.memory(), after: [] };
      for (const clients of clientCounts) {
        const pool = new Pool(runtime.url, { connections: clients });
        try {
          const point = await timeClients("runtime", concurrency, clients, async () => {
            return (await runtimeGenerate(pool, SMOLLM, messages, n)).outputTokens;
          });
          points.push(point);
          log(describe(point));
        } finally {
          await pool.close();
        }
        mem.after.push({ clients, memory: await runtime.memory() });
      }
      memory.push(mem);
    } finally {
      await runtime.stop();
    }
  }

  const peer = await openPeer(real.smollmPath, plan.threads, "q8");
  try {
    await peer.generate(messages, 2);
    const point = await timeClients(
      "peer",
      null,
      real.peerClients,
      async () => (await peer.generate(messages, n)).ids.length,
    );
    points.push(point);
    log(describe(point));
  } finally {
    await peer.release();
  }

  const bare = await openBareLoop(real.smollmPath, plan.threads, "onnx/model_quantized.onnx");
  try {
    // Half-way through an answer: the prompt plus half the new tokens are cached.
    const pastLength = promptTokens + n / 2;
    const batch = real.generationConcurrency;
    const step: StepBound = {
      pastLength,
      batch,
      batch1Ms: await bare.stepMs(1, pastLength, 10),
      batchMs: await bare.stepMs(batch, pastLength, 5),
    };
    log(
      `generation ${SMOLLM} in-process decode step (past ${pastLength}): batch 1 ${fmt(step.batch1Ms)} ms, ` +
        `batch ${batch} ${fmt(step.batchMs)} ms (${fmt(step.batchMs / batch)} ms per sequence)`,
    );
    return { points, memory, step };
  } finally {
    await bare.release();
  }
}

async function timeClients(
  engine: ConcurrentPoint["engine"],
  concurrency: number | null,
  clients: number,
  generate: () => Promise<number>,
): Promise<ConcurrentPoint> {
  const started = performance.now();
  const runs = await Promise.all(
    Array.from({ length: clients }, async () => {
      const sent = performance.now();
      const tokens = await generate();
      return { tokens, ms: performance.now() - sent };
    }),
  );
  const wallMs = performance.now() - started;
  const tokens = runs.reduce((sum, r) => sum + r.tokens, 0);
  const latencies = runs.map((r) => r.ms);
  return {
    engine,
    concurrency,
    clients,
    tokens,
    wallMs,
    tokensPerSecond: (tokens / wallMs) * 1000,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
  };
}

function describe(p: ConcurrentPoint): string {
  const who = p.engine === "peer" ? "peer" : `runtime concurrency=${p.concurrency}`;
  return (
    `generation ${SMOLLM} ${who} clients=${p.clients}: ${fmt(p.tokensPerSecond)} tok/s aggregate ` +
    `(${p.tokens} tokens in ${fmt(p.wallMs / 1000)} s; latency p50 ${fmt(p.p50Ms)} ms, p99 ${fmt(p.p99Ms)} ms)`
  );
}
