import { loadModel } from "../../../runtime/model/load-model.js";
import { PII_SENTENCES } from "../../runtime/real-models/pii-sentences.js";
import { median } from "../runtime/stats.js";
import type { ExtractPlan } from "./plan.js";

/**
 * What batching can gain at most: the extractor's cost per request (model
 * run, softmax and joining; no HTTP) with each request run alone and with
 * all of them in one batch, measured in this process while no server is
 * alive, in alternating pairs so that background load lands on both. When a
 * batch costs more per request than single runs, batching on cannot beat
 * batching off however the requests arrive.
 */
export interface BatchCost {
  batchSize: number;
  /** Median over the pairs of (time for `batchSize` requests one by one) / `batchSize`. */
  aloneMsPerRequest: number;
  /** Median over the pairs of (time for one batch of `batchSize`) / `batchSize`. */
  batchedMsPerRequest: number;
  pairs: number;
}

export async function measureBatchCost(plan: ExtractPlan, batchSize: number): Promise<BatchCost> {
  const model = await loadModel({
    path: plan.modelPath,
    onnxFile: plan.onnxFile,
    overflow: "truncate",
    threads: plan.threads,
  });
  if (model.task !== "entity-extraction") throw new Error(`${plan.modelId} is not an extractor`);
  try {
    const extractor = model.extractor;
    const settings = { labels: null, threshold: plan.threshold };
    const prepared = Array.from({ length: batchSize }, (_, i) =>
      extractor.prepare(PII_SENTENCES[i % PII_SENTENCES.length]!.text, settings),
    );
    // First runs at each shape pay for allocations.
    await extractor.runBatch(prepared);
    for (const item of prepared) await extractor.runBatch([item]);
    const alone: number[] = [];
    const batched: number[] = [];
    const deadline = performance.now() + (plan.quick ? 4_000 : 12_000);
    while (alone.length < 10 && (alone.length < 2 || performance.now() < deadline)) {
      let started = performance.now();
      for (const item of prepared) await extractor.runBatch([item]);
      alone.push((performance.now() - started) / batchSize);
      started = performance.now();
      await extractor.runBatch(prepared);
      batched.push((performance.now() - started) / batchSize);
    }
    return {
      batchSize,
      aloneMsPerRequest: median(alone),
      batchedMsPerRequest: median(batched),
      pairs: alone.length,
    };
  } finally {
    await model.session.release();
  }
}
