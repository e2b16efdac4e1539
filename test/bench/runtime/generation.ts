import { Pool } from "undici";
import { openBareLoop, type BareLoop } from "./bare-loop.js";
import { checkSameTokens, choosePrompt, eosIds, runtimeGenerate } from "./generation-check.js";
import { openPeer, type ChatMessage, type Peer } from "./peer.js";
import type { BenchPlan } from "./plan.js";
import { startRuntimeProcess } from "./runtime-process.js";
import { fmt, median, relativeSpread } from "./stats.js";

/**
 * (b) and (c): one greedy generation of `newTokens` tokens, one client at a
 * time, through our runtime over HTTP (a child process), a bare session.run
 * loop and the transformers.js pipeline (both in this process), on the same
 * ONNX file with the same intra-op threads. Rounds interleave the three,
 * rotating their order, so drift of the machine falls on all of them;
 * nothing ever runs concurrently, and the idle runtime child uses no CPU
 * while the others run. One target (a model) may have several cases (prompt
 * lengths); the three engines are loaded once for all of them.
 *
 * Definitions, the same for all three: a run is timed from the call to the
 * last token in hand. Time to first token is the time of a run asked for one
 * token (prompt step included); per-token time is (time of the full run -
 * time to first token) / (tokens - 1); tokens/s is tokens / full-run time.
 */
export type EngineName = "runtime" | "bare" | "peer";

export interface EngineFigures {
  tokens: number;
  tokensPerSecond: number;
  /** From the fastest full run: other work on the machine only ever slows a run down. */
  bestTokensPerSecond: number;
  totalMs: number;
  firstTokenMs: number;
  perTokenMs: number;
  /** (max - min) / median of the full-run times. */
  spread: number;
}

export interface GenerationTarget {
  modelId: string;
  folder: string;
  /** The graph inside the folder; the runtime picks the same one by itself. */
  onnxFile: string;
  peerDtype: "fp32" | "q8";
  cases: GenerationCase[];
}

export interface GenerationCase {
  name: string;
  /** Tried in order; the first whose greedy output has no eos is used. */
  candidates: ReadonlyArray<ChatMessage[]>;
  warmupRounds: number;
  /** Multiples of 3, so each engine takes each place in the rotation equally often. */
  rounds: number;
  /** 1-token requests per round and engine, for time to first token. */
  firstTokenSamples: number;
}

export interface GenerationFigures {
  label: string;
  promptTokens: number;
  prompt: string;
  messages: ChatMessage[];
  /** True when all three engines produced the same token sequence. */
  sameTokens: boolean;
  rounds: number;
  engines: Record<EngineName, EngineFigures>;
  /**
   * Median over rounds of the runtime's tokens/s divided by the other's in the
   * same round. Other work on a shared machine comes and goes over seconds;
   * runs seconds apart see the same load, so these pairs cancel most of it.
   */
  paired: { overBare: number; overPeer: number };
  profileDir: string | null;
}

interface Engine {
  /** Runs one greedy generation; returns the tokens made. */
  run(newTokens: number): Promise<number>;
}

export async function measureGeneration(
  plan: BenchPlan,
  target: GenerationTarget,
  profileDir: string | null,
  log: (line: string) => void,
): Promise<GenerationFigures[]> {
  const n = plan.generation.newTokens;
  const started = performance.now();
  const runtime = await startRuntimeProcess(
    { path: target.folder, modelId: target.modelId, threads: plan.threads, throughput: {} },
    profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [],
  );
  const pool = new Pool(runtime.url, { connections: 1 });
  let bare: BareLoop | null = null;
  let peer: Peer | null = null;
  try {
    bare = await openBareLoop(target.folder, plan.threads, target.onnxFile);
    peer = await openPeer(target.folder, plan.threads, target.peerDtype);
    log(
      `generation ${target.modelId}: runtime child, bare loop and peer loaded in ` +
        `${Math.round(performance.now() - started)} ms (threads=${plan.threads})`,
    );
    const eos = await eosIds(target.folder);
    const results: GenerationFigures[] = [];
    for (const c of target.cases) {
      const label = `${target.modelId} ${c.name}`;
      const chosen = await choosePrompt(c.candidates, bare, peer, eos, n, log);
      const check = await checkSameTokens(pool, target.modelId, bare, peer, chosen, n);
      log(
        `generation ${label}: prompt of ${chosen.ids.length} tokens; tokens made runtime=${check.runtime} ` +
          `bare=${n} peer=${check.peer}; same token sequence: ${check.same ? "yes" : "NO"}`,
      );
      const b = bare;
      const p = peer;
      const engines: Record<EngineName, Engine> = {
        runtime: {
          run: async (k) =>
            (await runtimeGenerate(pool, target.modelId, chosen.messages, k)).outputTokens,
        },
        bare: { run: async (k) => (await b.generate(chosen.ids, k)).ids.length },
        peer: { run: async (k) => (await p.generate(chosen.messages, k)).ids.length },
      };
      const samples = await measureRounds(plan, c, label, engines, log);
      results.push({
        label,
        promptTokens: chosen.ids.length,
        prompt: chosen.messages.map((m) => m.content).join(" | "),
        messages: chosen.messages,
        sameTokens: check.same,
        rounds: samples.rounds,
        engines: {
          runtime: figures(samples.runtime),
          bare: figures(samples.bare),
          peer: figures(samples.peer),
        },
        paired: {
          overBare: pairedRatio(samples.runtime, samples.bare),
          overPeer: pairedRatio(samples.runtime, samples.peer),
        },
        profileDir,
      });
    }
    return results;
  } finally {
    await pool.close();
    await runtime.stop();
    await bare?.release();
    await peer?.release();
  }
}

interface Sample {
  tokens: number;
  totalMs: number;
  firstTokenMs: number;
}

async function measureRounds(
  plan: BenchPlan,
  g: GenerationCase,
  label: string,
  engines: Record<EngineName, Engine>,
  log: (line: string) => void,
): Promise<Record<EngineName, Sample[]> & { rounds: number }> {
  const { newTokens, roundTimeoutMs } = plan.generation;
  const order: EngineName[] = ["runtime", "bare", "peer"];
  const samples: Record<EngineName, Sample[]> = { runtime: [], bare: [], peer: [] };
  const total = g.warmupRounds + g.rounds;
  let rounds = 0;
  for (let round = 0; round < total; round++) {
    const roundStarted = performance.now();
    const warmup = round < g.warmupRounds;
    const line: string[] = [];
    for (let k = 0; k < order.length; k++) {
      const name = order[(round + k) % order.length]!;
      const sample = await timeEngine(engines[name], newTokens, g.firstTokenSamples);
      if (!warmup) samples[name].push(sample);
      line.push(`${name} ${fmt((sample.tokens / sample.totalMs) * 1000)} tok/s`);
    }
    if (!warmup) rounds++;
    const which = warmup ? `warm-up ${round + 1}/${g.warmupRounds}` : `round ${rounds}/${g.rounds}`;
    log(`generation ${label} ${which}: ${line.join(", ")}`);
    if (performance.now() - roundStarted > roundTimeoutMs) {
      log(`generation: a round took over ${roundTimeoutMs} ms; stopping the rounds here`);
      break;
    }
  }
  return { ...samples, rounds };
}

async function timeEngine(
  engine: Engine,
  newTokens: number,
  firstSamples: number,
): Promise<Sample> {
  const firstTimes: number[] = [];
  for (let i = 0; i < firstSamples; i++) {
    const started = performance.now();
    await engine.run(1);
    firstTimes.push(performance.now() - started);
  }
  const started = performance.now();
  const tokens = await engine.run(newTokens);
  return { tokens, totalMs: performance.now() - started, firstTokenMs: median(firstTimes) };
}

function figures(samples: readonly Sample[]): EngineFigures {
  const totalMs = median(samples.map((s) => s.totalMs));
  const firstTokenMs = median(samples.map((s) => s.firstTokenMs));
  const tokens = median(samples.map((s) => s.tokens));
  return {
    tokens,
    tokensPerSecond: median(samples.map((s) => (s.tokens / s.totalMs) * 1000)),
    bestTokensPerSecond: Math.max(...samples.map((s) => (s.tokens / s.totalMs) * 1000)),
    totalMs,
    firstTokenMs,
    perTokenMs: median(samples.map((s) => (s.totalMs - s.firstTokenMs) / (s.tokens - 1))),
    spread: relativeSpread(samples.map((s) => s.totalMs)),
  };
}

function pairedRatio(ours: readonly Sample[], theirs: readonly Sample[]): number {
  const speed = (s: Sample) => s.tokens / s.totalMs;
  return median(ours.map((s, round) => speed(s) / speed(theirs[round]!)));
}
