import { existsSync } from "node:fs";
import { basename, join } from "node:path";
import { DEFAULT_THROUGHPUT } from "../../../runtime/model-service.js";
import { defaultIntraOpThreads } from "../../../runtime/engine/cpu-limit.js";
import { sharedModel, sharedModelsDir } from "../../support/shared-models.js";

/**
 * Every count and duration of one benchmark run, decided up front so that a
 * run's length is known before it starts: about 7-8 minutes in full (fixture
 * models, then the real models when `../shared/models` holds them), about 1.5
 * with `--quick` (fixture models only). Flags: --quick, --real (the real-model
 * section also in a quick run; an error when the models are missing),
 * --real-only (skip the fixture section), --llama-only (only our runtime
 * against llama.cpp), --no-llama (skip that section), --llama-model FOLDER
 * (serve that folder against llama.cpp), --profile (CPU profile of the
 * runtime child during fixture generation), --threads N, --window-ms N.
 */
export interface BenchPlan {
  quick: boolean;
  profile: boolean;
  threads: number;
  /** Hard stop for the whole run; a watchdog ends the process past it. */
  deadlineMs: number;
  fixtures: boolean;
  classification: {
    /** bench-nli (the target) and tiny-nli, short inputs. */
    clients: number[];
    /** Each point runs for this long or this many requests, whichever ends first. */
    pointMs: number;
    /** bench-nli's model runs take ~20 ms a request: longer points than tiny-nli's. */
    benchNliPointMs: number;
    pointMaxRequests: number;
    warmupMs: number;
    batchOn: { maxBatchSize: number; batchWindowMs: number };
    batchOff: { maxBatchSize: number; batchWindowMs: number };
    /** Client counts for tiny-nli's long-input points (heavier model runs). */
    longClients: number[];
  };
  generation: {
    newTokens: number;
    warmupRounds: number;
    rounds: number;
    /** 1-token requests per round and engine, for time to first token. */
    firstTokenSamples: number;
    /** No single round may take longer than this. */
    roundTimeoutMs: number;
  };
  /** The real-model section; null when it does not run. */
  real: RealPlan | null;
  /** Our runtime against llama.cpp (versus-llama.ts); null when it does not run. */
  llama: LlamaPlan | null;
}

export interface LlamaPlan {
  /** The onnxruntime-genai int4 build of SmolLM2, made from the GGUF llama.cpp serves. */
  modelPath: string;
  modelId: string;
  /** A full run builds llama-server when it is not cached; a quick run skips the peer. */
  buildIfMissing: boolean;
  prompts: Array<"short" | "long">;
  clients: number[];
  rounds: number;
  firstTokenSamples: number;
  /** Sequences decoded together on both sides: our concurrency, llama.cpp's slots. */
  sequences: number;
  /**
   * llama.cpp's KV cache is allocated whole at start: 16 sequences of this
   * many tokens (the long prompt plus 64 new tokens fit), the least it needs.
   */
  contextPerSequence: number;
}

export interface RealPlan {
  smollmPath: string;
  minilmPath: string;
  /** Single client, ~30-token and ~500-token prompts: rounds of the three engines. */
  shortRounds: number;
  shortWarmupRounds: number;
  longRounds: number;
  /** Concurrent clients, each one 64-token request, at --generation-concurrency 16 and 1. */
  batchedClients: number[];
  oneByOneClients: number[];
  /** The peer runs this many pipeline calls at once in one process. */
  peerClients: number;
  generationConcurrency: number;
  /** all-minilm-l6-v2 classification: one batch of 32 takes ~2 s on 2 cores. */
  minilmClients: number[];
  minilmPointMs: number;
}

export const SMOLLM = "smollm2-135m-instruct";
export const SMOLLM_INT4 = "smollm2-135m-instruct-int4";
export const MINILM = "all-minilm-l6-v2";

function flagValue(args: readonly string[], name: string): string | undefined {
  const index = args.indexOf(name);
  return index >= 0 ? args[index + 1] : undefined;
}

function realPlan(args: readonly string[], quick: boolean): RealPlan | null {
  if (args.includes("--llama-only")) return null;
  const asked = args.includes("--real") || args.includes("--real-only");
  if (quick && !asked) return null;
  const smollmPath = sharedModel(SMOLLM);
  const minilmPath = sharedModel(MINILM);
  if (!smollmPath || !minilmPath) {
    if (asked) throw new Error(`--real needs ${SMOLLM} and ${MINILM} in the shared models folder`);
    return null;
  }
  return {
    smollmPath,
    minilmPath,
    shortRounds: quick ? 3 : 6,
    shortWarmupRounds: 1,
    longRounds: 3,
    // A quick run stops at 4 clients: 16 one after another take ~50 s on their own.
    batchedClients: quick ? [1, 4] : [1, 4, 16],
    oneByOneClients: quick ? [1, 4] : [1, 4, 16],
    peerClients: quick ? 4 : 16,
    generationConcurrency: 16,
    minilmClients: quick ? [1, 32] : [1, 8, 32],
    minilmPointMs: quick ? 4_000 : 8_000,
  };
}

function llamaPlan(args: readonly string[], quick: boolean): LlamaPlan | null {
  if (args.includes("--no-llama")) return null;
  // --llama-model FOLDER serves another build of the same weights (the int8 one, say).
  const asked = flagValue(args, "--llama-model");
  const modelPath = asked ?? join(sharedModelsDir(), SMOLLM_INT4);
  if (!asked && !existsSync(join(modelPath, "genai_config.json"))) return null;
  return {
    modelPath,
    modelId: basename(modelPath),
    buildIfMissing: !quick,
    prompts: quick ? ["short"] : ["short", "long"],
    clients: quick ? [1, 4] : [1, 4, 16],
    rounds: quick ? 1 : 3,
    firstTokenSamples: quick ? 1 : 3,
    sequences: 16,
    contextPerSequence: 640,
  };
}

export function planFrom(args: readonly string[]): BenchPlan {
  const quick = args.includes("--quick");
  const threads = Number(flagValue(args, "--threads") ?? defaultIntraOpThreads());
  const windowMs = Number(flagValue(args, "--window-ms") ?? DEFAULT_THROUGHPUT.batchWindowMs);
  if (!Number.isInteger(threads) || threads < 1) throw new Error("--threads needs a whole number");
  if (!(windowMs >= 0)) throw new Error("--window-ms needs a number of milliseconds");
  const real = realPlan(args, quick);
  const llama = llamaPlan(args, quick);
  const fixtures = !args.includes("--real-only") && !args.includes("--llama-only");
  return {
    quick,
    profile: args.includes("--profile"),
    threads,
    // A guard against hangs, well above the expected length (a busy machine is slower).
    // A full run may first build llama-server (about 5 minutes on 2 cores).
    deadlineMs:
      (fixtures ? (quick ? 180_000 : 360_000) : 0) +
      (real ? (quick ? 420_000 : 540_000) : 0) +
      (llama ? (quick ? 120_000 : 1_500_000) : 0),
    fixtures,
    classification: {
      clients: quick ? [1, 32] : [1, 8, 32],
      pointMs: quick ? 1_500 : 4_000,
      benchNliPointMs: quick ? 2_500 : 6_000,
      pointMaxRequests: 50_000,
      warmupMs: quick ? 500 : 1_500,
      batchOn: { maxBatchSize: DEFAULT_THROUGHPUT.maxBatchSize, batchWindowMs: windowMs },
      batchOff: { maxBatchSize: 1, batchWindowMs: 0 },
      longClients: [32],
    },
    generation: {
      newTokens: 64,
      warmupRounds: quick ? 1 : 2,
      // Multiples of 3, so each engine takes each place in the rotation equally often.
      rounds: quick ? 6 : real ? 9 : 15,
      firstTokenSamples: 3,
      roundTimeoutMs: 60_000,
    },
    real,
    llama,
  };
}
