import { existsSync } from "node:fs";
import { DEFAULT_THROUGHPUT } from "../../../runtime/model-service.js";
import { defaultIntraOpThreads } from "../../../runtime/engine/cpu-limit.js";

/**
 * Every count and duration of one benchmark run, decided up front so that a
 * run's length is known before it starts: about 4 minutes in full, about 1
 * with `--quick`. Flags: --quick, --profile (CPU profile of the runtime child
 * during generation), --threads N, --window-ms N, --minilm DIR|none (the real
 * sentence-embedding classifier; on by default in a full run, off in --quick).
 */
export interface BenchPlan {
  quick: boolean;
  profile: boolean;
  threads: number;
  /** Hard stop for the whole run; a watchdog ends the process past it. */
  deadlineMs: number;
  classification: {
    clients: number[];
    /** Each point runs for this long or this many requests, whichever ends first. */
    pointMs: number;
    pointMaxRequests: number;
    warmupMs: number;
    batchOn: { maxBatchSize: number; batchWindowMs: number };
    batchOff: { maxBatchSize: number; batchWindowMs: number };
    /** Client counts for the long-input points (heavier model runs). */
    longClients: number[];
    /** A real sentence-embedding classifier, when the folder exists. */
    minilmPath: string | null;
    minilmClients: number[];
    /** One batch of 32 takes about 2 s on this model: longer points than tiny-nli. */
    minilmPointMs: number;
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
}

const DEFAULT_MINILM = "/work/shared/models/all-minilm-l6-v2";

function flagValue(args: readonly string[], name: string): string | undefined {
  const index = args.indexOf(name);
  return index >= 0 ? args[index + 1] : undefined;
}

export function planFrom(args: readonly string[]): BenchPlan {
  const quick = args.includes("--quick");
  const threads = Number(flagValue(args, "--threads") ?? defaultIntraOpThreads());
  const windowMs = Number(flagValue(args, "--window-ms") ?? DEFAULT_THROUGHPUT.batchWindowMs);
  // The real classifier costs ~30 s; a quick run skips it unless asked for.
  const minilmFlag = flagValue(args, "--minilm") ?? (quick ? "none" : DEFAULT_MINILM);
  const minilmPath = minilmFlag !== "none" && existsSync(minilmFlag) ? minilmFlag : null;
  if (!Number.isInteger(threads) || threads < 1) throw new Error("--threads needs a whole number");
  if (!(windowMs >= 0)) throw new Error("--window-ms needs a number of milliseconds");
  return {
    quick,
    profile: args.includes("--profile"),
    threads,
    deadlineMs: quick ? 150_000 : 420_000,
    classification: {
      clients: [1, 8, 32],
      pointMs: quick ? 1_500 : 5_000,
      pointMaxRequests: 50_000,
      warmupMs: quick ? 500 : 1_500,
      batchOn: { maxBatchSize: DEFAULT_THROUGHPUT.maxBatchSize, batchWindowMs: windowMs },
      batchOff: { maxBatchSize: 1, batchWindowMs: 0 },
      longClients: [32],
      minilmPath,
      minilmClients: quick ? [32] : [1, 32],
      minilmPointMs: quick ? 4_000 : 8_000,
    },
    generation: {
      newTokens: 64,
      warmupRounds: quick ? 1 : 2,
      // Multiples of 3, so each engine takes each place in the rotation equally often.
      rounds: quick ? 6 : 15,
      firstTokenSamples: 3,
      roundTimeoutMs: 60_000,
    },
  };
}
