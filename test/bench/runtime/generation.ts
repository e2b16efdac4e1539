import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Pool } from "undici";
import { openBareLoop, type BareLoop } from "./bare-loop.js";
import { PROMPT_CANDIDATES, responsesBody } from "./generation-prompt.js";
import { openPeer, type ChatMessage, type Peer } from "./peer.js";
import type { BenchPlan } from "./plan.js";
import { startRuntimeProcess } from "./runtime-process.js";
import { fmt, median, relativeSpread } from "./stats.js";

/**
 * (b) and (c): one greedy generation of `newTokens` tokens, one client at a
 * time, through our runtime over HTTP (a child process), a bare session.run
 * loop and the transformers.js pipeline (both in this process). Rounds
 * interleave the three, rotating their order, so drift of the machine falls
 * on all of them; nothing ever runs concurrently, and the idle runtime child
 * uses no CPU while the others run.
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

export interface GenerationFigures {
  promptTokens: number;
  prompt: string;
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

const MODEL_ID = "bench-gpt";

export async function measureGeneration(
  plan: BenchPlan,
  folder: string,
  profileDir: string | null,
  log: (line: string) => void,
): Promise<GenerationFigures> {
  const g = plan.generation;
  const started = performance.now();
  const runtime = await startRuntimeProcess(
    { path: folder, modelId: MODEL_ID, threads: plan.threads, throughput: {} },
    profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [],
  );
  const pool = new Pool(runtime.url, { connections: 1 });
  let bare: BareLoop | null = null;
  let peer: Peer | null = null;
  try {
    bare = await openBareLoop(folder, plan.threads);
    peer = await openPeer(folder, plan.threads);
    log(
      `generation: runtime child, bare loop and peer loaded in ${Math.round(performance.now() - started)} ms ` +
        `(threads=${plan.threads})`,
    );
    const eos = await eosIds(folder);
    const chosen = await choosePrompt(bare, peer, eos, g.newTokens, log);
    const check = await checkSameTokens(pool, bare, peer, chosen, g.newTokens);
    log(
      `generation: prompt of ${chosen.ids.length} tokens; tokens made runtime=${check.runtime} ` +
        `bare=${g.newTokens} peer=${check.peer}; same token sequence: ${check.same ? "yes" : "NO"}`,
    );

    const engines: Record<EngineName, Engine> = {
      runtime: { run: (n) => runtimeGenerate(pool, chosen.messages, n) },
      bare: { run: async (n) => (await bare!.generate(chosen.ids, n)).ids.length },
      peer: { run: async (n) => (await peer!.generate(chosen.messages, n)).ids.length },
    };
    const samples = await measureRounds(plan, engines, log);
    return {
      promptTokens: chosen.ids.length,
      prompt: chosen.messages.map((m) => m.content).join(" | "),
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
    };
  } finally {
    await pool.close();
    await runtime.stop();
    await bare?.release();
    await peer?.release();
  }
}

interface Chosen {
  messages: ChatMessage[];
  ids: number[];
}

async function eosIds(folder: string): Promise<Set<number>> {
  const config = JSON.parse(await readFile(join(folder, "generation_config.json"), "utf8")) as {
    eos_token_id?: number | number[];
  };
  const raw = config.eos_token_id ?? [];
  return new Set(Array.isArray(raw) ? raw : [raw]);
}

/** The first candidate whose greedy continuation has no end-of-sequence token. */
async function choosePrompt(
  bare: BareLoop,
  peer: Peer,
  eos: ReadonlySet<number>,
  newTokens: number,
  log: (line: string) => void,
): Promise<Chosen> {
  for (const [index, messages] of PROMPT_CANDIDATES.entries()) {
    const ids = peer.promptIds(messages);
    const run = await bare.generate(ids, newTokens);
    const stopAt = run.ids.findIndex((id) => eos.has(id));
    if (stopAt < 0) return { messages, ids };
    log(`generation: prompt candidate ${index} meets eos after ${stopAt} tokens; trying the next`);
  }
  throw new Error(`every prompt candidate meets eos within ${newTokens} greedy tokens`);
}

async function checkSameTokens(
  pool: Pool,
  bare: BareLoop,
  peer: Peer,
  chosen: Chosen,
  newTokens: number,
): Promise<{ runtime: number; peer: number; same: boolean }> {
  const bareIds = (await bare.generate(chosen.ids, newTokens)).ids;
  const peerIds = (await peer.generate(chosen.messages, newTokens)).ids;
  const response = await pool.request({
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: responsesBody(MODEL_ID, chosen.messages, newTokens),
  });
  const body = (await response.body.json()) as ResponsesBody;
  if (response.statusCode !== 200) throw new Error(`runtime answered ${response.statusCode}`);
  const inputTokens = Number(response.headers["x-modelgate-input-tokens"]);
  const text = body.output?.[0]?.content?.[0]?.text ?? "";
  const same =
    inputTokens === chosen.ids.length &&
    peerIds.join(",") === bareIds.join(",") &&
    text === peer.decode(bareIds);
  return { runtime: body.usage?.output_tokens ?? 0, peer: peerIds.length, same };
}

interface ResponsesBody {
  usage?: { output_tokens?: number };
  output?: Array<{ content?: Array<{ text?: string }> }>;
}

async function runtimeGenerate(
  pool: Pool,
  messages: ChatMessage[],
  newTokens: number,
): Promise<number> {
  const response = await pool.request({
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: responsesBody(MODEL_ID, messages, newTokens),
  });
  const body = (await response.body.json()) as ResponsesBody;
  if (response.statusCode !== 200) throw new Error(`runtime answered ${response.statusCode}`);
  return body.usage?.output_tokens ?? 0;
}

interface Sample {
  tokens: number;
  totalMs: number;
  firstTokenMs: number;
}

async function measureRounds(
  plan: BenchPlan,
  engines: Record<EngineName, Engine>,
  log: (line: string) => void,
): Promise<Record<EngineName, Sample[]> & { rounds: number }> {
  const g = plan.generation;
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
      const sample = await timeEngine(engines[name], g.newTokens, g.firstTokenSamples);
      if (!warmup) samples[name].push(sample);
      line.push(`${name} ${fmt((sample.tokens / sample.totalMs) * 1000)} tok/s`);
    }
    if (!warmup) rounds++;
    const label = warmup ? `warm-up ${round + 1}/${g.warmupRounds}` : `round ${rounds}/${g.rounds}`;
    log(`generation ${label}: ${line.join(", ")}`);
    if (performance.now() - roundStarted > g.roundTimeoutMs) {
      log(`generation: a round took over ${g.roundTimeoutMs} ms; stopping the rounds here`);
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
