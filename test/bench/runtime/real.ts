import { measureBatchCost, type BatchCost } from "./batch-ceiling.js";
import { measureClassification, type ClassificationRun } from "./classification.js";
import { measureGeneration, type GenerationFigures } from "./generation.js";
import { LONG_PROMPTS, SHORT_PROMPTS } from "./real-prompts.js";
import { measureConcurrentGeneration, type ConcurrentFigures } from "./real-concurrent.js";
import { MINILM, SMOLLM, type BenchPlan, type RealPlan } from "./plan.js";
import { fmt } from "./stats.js";

/**
 * The real-model section (issue "1b"): SmolLM2-135M-Instruct (int8) against
 * the bare loop and transformers.js at one client with a short and a long
 * prompt, then concurrent clients; all-minilm-l6-v2 classification with
 * batching on and off; resident memory of each runtime child.
 */
export interface RealFigures {
  generation: GenerationFigures[];
  concurrent: ConcurrentFigures;
  classification: ClassificationRun;
  costs: BatchCost[];
}

export async function measureReal(
  plan: BenchPlan,
  real: RealPlan,
  log: (line: string) => void,
): Promise<RealFigures> {
  const generation = await measureGeneration(
    plan,
    {
      modelId: SMOLLM,
      folder: real.smollmPath,
      onnxFile: "onnx/model_quantized.onnx",
      peerDtype: "q8",
      cases: [
        {
          name: "short prompt",
          candidates: SHORT_PROMPTS,
          warmupRounds: real.shortWarmupRounds,
          rounds: real.shortRounds,
          firstTokenSamples: 3,
        },
        {
          // Already warm; one first-token sample, as each costs a whole long prompt step.
          name: "long prompt",
          candidates: LONG_PROMPTS,
          warmupRounds: 0,
          rounds: real.longRounds,
          firstTokenSamples: 1,
        },
      ],
    },
    null,
    log,
  );
  const short = generation[0]!;
  const concurrent = await measureConcurrentGeneration(
    plan,
    real,
    short.messages,
    short.promptTokens,
    log,
  );

  const classification = await measureClassification(
    plan,
    [
      {
        model: MINILM,
        path: real.minilmPath,
        pointMs: real.minilmPointMs,
        points: real.minilmClients.map((clients) => ({ input: "short" as const, clients })),
      },
    ],
    log,
  );
  const cost = await measureBatchCost(
    MINILM,
    real.minilmPath,
    plan.threads,
    plan.classification.batchOn.maxBatchSize,
  );
  log(
    `classification ${MINILM} in-process: prepare ${fmt(cost.prepareMs)} ms/request, model run ` +
      `${fmt(cost.runMsPerRequestAt1)} ms/request at batch 1, ${fmt(cost.runMsPerRequestAtMax)} at batch ${cost.maxBatchSize}`,
  );
  return { generation, concurrent, classification, costs: [cost] };
}
