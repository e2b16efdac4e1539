import { DEFAULT_THROUGHPUT, type ThroughputOptions } from "../../../runtime/model-service.js";
import { defaultIntraOpThreads } from "../../../runtime/engine/cpu-limit.js";
import { sharedModel, sharedModelsDir } from "../../support/shared-models.js";

/**
 * Every count and duration of one entity-extraction benchmark run, decided
 * up front: about 2.5 minutes in full, under a minute with `--quick`.
 * Flags: --quick, --threads N, --rounds N, --point-ms N.
 */
export interface ExtractPlan {
  quick: boolean;
  threads: number;
  /** Hard stop for the whole run; a watchdog ends the process past it. */
  deadlineMs: number;
  modelId: string;
  modelPath: string;
  modelsDir: string;
  onnxFile: string;
  clients: number[];
  /** Rounds per client count; each round measures every engine once, in rotating order. */
  rounds: number;
  /** Each point runs for this long or this many requests, whichever ends first. */
  pointMs: number;
  pointMaxRequests: number;
  warmupMs: number;
  /** The runtime's default; the peer drops entities below it too. */
  threshold: number;
  batchOn: Partial<ThroughputOptions>;
  batchOff: Partial<ThroughputOptions>;
}

export const RAMPART = "rampart-pii";
export const RAMPART_ONNX = "onnx/model_q4.onnx";

function flagNumber(args: readonly string[], name: string): number | undefined {
  const index = args.indexOf(name);
  if (index < 0) return undefined;
  const value = Number(args[index + 1]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} needs a whole number`);
  return value;
}

export function planFrom(args: readonly string[]): ExtractPlan {
  const quick = args.includes("--quick");
  const modelPath = sharedModel(RAMPART, RAMPART_ONNX);
  if (!modelPath) {
    throw new Error(
      `the entity-extraction benchmark needs ${RAMPART}/${RAMPART_ONNX} in ${sharedModelsDir()}`,
    );
  }
  const rounds = flagNumber(args, "--rounds") ?? (quick ? 1 : 3);
  const pointMs = flagNumber(args, "--point-ms") ?? (quick ? 1_500 : 4_000);
  const clients = [1, 8, 32];
  return {
    quick,
    threads: flagNumber(args, "--threads") ?? defaultIntraOpThreads(),
    // Three engines per point, plus start-up and warm-up; a guard against hangs,
    // well above the expected length (a busy machine is slower).
    deadlineMs: 90_000 + 2 * clients.length * rounds * 3 * pointMs,
    modelId: RAMPART,
    modelPath,
    modelsDir: sharedModelsDir(),
    onnxFile: RAMPART_ONNX,
    clients,
    rounds,
    pointMs,
    pointMaxRequests: 100_000,
    warmupMs: quick ? 500 : 1_500,
    threshold: 0.5,
    batchOn: { maxBatchSize: DEFAULT_THROUGHPUT.maxBatchSize },
    batchOff: { maxBatchSize: 1, batchWindowMs: 0 },
  };
}
