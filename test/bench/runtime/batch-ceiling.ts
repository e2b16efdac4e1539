import { loadModel } from "../../../runtime/model/load-model.js";
import type { ResponsesRequest } from "../../../api/responses-request.js";
import { shortBodies } from "./classification-inputs.js";
import { median } from "./stats.js";

/**
 * Why batching gains what it gains: the model's cost per request at batch 1
 * and at the largest batch, and what preparing a request (tokenizing) costs,
 * measured in this process with no HTTP. onnxruntime-node 1.30 runs
 * session.run synchronously on the JavaScript thread (inside a setImmediate),
 * so the runtime's event loop does one thing at a time: HTTP, preparing and
 * model runs add up, and batching can only shrink the model's part. Combined
 * with the HTTP figure (1000 / unbatched req/s) that gives Amdahl's ceiling.
 */
export interface BatchCost {
  model: string;
  prepareMs: number;
  runMsPerRequestAt1: number;
  runMsPerRequestAtMax: number;
  maxBatchSize: number;
}

const RUNS = 15;
const PREPARES = 200;
/** Per measured quantity; a heavy model gets fewer runs, never fewer than one. */
const TIME_LIMIT_MS = 3_000;

export async function measureBatchCost(
  model: string,
  path: string,
  threads: number,
  maxBatchSize: number,
): Promise<BatchCost> {
  const loaded = await loadModel({ path, overflow: "truncate", threads });
  if (loaded.task !== "zero-shot-classification") throw new Error(`${model} is not a classifier`);
  try {
    const classifier = loaded.classifier;
    const requests = shortBodies(model).map(
      (body) => ({ truncation: "auto", ...JSON.parse(body) }) as ResponsesRequest,
    );
    const started = performance.now();
    const prepareDeadline = started + TIME_LIMIT_MS;
    let prepares = 0;
    while (prepares < PREPARES && performance.now() < prepareDeadline) {
      classifier.prepare(requests[prepares % requests.length]!);
      prepares++;
    }
    const prepareMs = (performance.now() - started) / prepares;
    const prepared = requests.map((r) => classifier.prepare(r));
    const perRequest = async (size: number): Promise<number> => {
      const batch = Array.from({ length: size }, (_, i) => prepared[i % prepared.length]!);
      await classifier.runBatch(batch);
      const deadline = performance.now() + TIME_LIMIT_MS;
      const times: number[] = [];
      while (times.length < RUNS && (times.length === 0 || performance.now() < deadline)) {
        const t = performance.now();
        await classifier.runBatch(batch);
        times.push(performance.now() - t);
      }
      return median(times) / size;
    };
    return {
      model,
      prepareMs,
      runMsPerRequestAt1: await perRequest(1),
      runMsPerRequestAtMax: await perRequest(maxBatchSize),
      maxBatchSize,
    };
  } finally {
    await loaded.session.release();
  }
}

/** Amdahl: only the model's share of a request's cost shrinks with batching. */
export function batchingCeiling(cost: BatchCost, unbatchedRequestsPerSecond: number): number {
  const perRequestMs = 1000 / unbatchedRequestsPerSecond;
  const saved = cost.runMsPerRequestAt1 - cost.runMsPerRequestAtMax;
  return perRequestMs / Math.max(perRequestMs - saved, 1e-9);
}
