import type { ResponsesRequest } from "../api/responses-request.js";
import type { LabelScores, PreparedClassification } from "./classify/classifier.js";
import { Batcher } from "./engine/batcher.js";
import { DecodeScheduler } from "./generation/decode-scheduler.js";
import type { GenerationOutcome, PreparedGeneration } from "./generation/text-generator.js";
import type { RuntimeMetrics } from "./metrics.js";
import type { LoadedModel } from "./model/load-model.js";

/**
 * A loaded model behind its batcher: the one object the HTTP layer talks to.
 * Preparing (tokenising, the token limit) happens on arrival so that a bad
 * request is refused before it waits in the queue.
 */
export interface ThroughputOptions {
  /** Classification: most requests in one model run. */
  maxBatchSize: number;
  /** Classification: how long the first request of a batch waits for company. */
  batchWindowMs: number;
  /** Generation: sequences decoded at once (in one batch when the graph has a KV cache). */
  generationConcurrency: number;
  /** Requests allowed to wait before new ones get 429. */
  maxQueue: number;
}

export const DEFAULT_THROUGHPUT: ThroughputOptions = {
  maxBatchSize: 32,
  // No wait when the model is idle: requests that arrive while a batch runs
  // form the next batch, so batches grow with load and a lone request is not delayed.
  batchWindowMs: 0,
  generationConcurrency: 8,
  maxQueue: 256,
};

export type ServiceResult =
  | { task: "text-generation"; outcome: GenerationOutcome }
  | { task: "zero-shot-classification"; scores: LabelScores; inputTokens: number };

interface GenerationJob {
  prepared: PreparedGeneration;
  signal: AbortSignal | undefined;
}

export class ModelService {
  /** Graphs without a KV cache: one sequence per run, bounded concurrency. */
  private readonly generations: Batcher<GenerationJob, GenerationOutcome> | null = null;
  /** Graphs with a KV cache: continuous batching. */
  private readonly decoder: DecodeScheduler | null = null;
  private readonly classifications: Batcher<PreparedClassification, LabelScores> | null = null;

  constructor(
    readonly model: LoadedModel,
    options: ThroughputOptions,
    private readonly metrics: RuntimeMetrics,
    private readonly random: () => number,
  ) {
    const onBatch = (size: number) => metrics.batchSize.observe(size);
    if (model.task === "text-generation" && model.generator.canBatch) {
      const generator = model.generator;
      this.decoder = new DecodeScheduler(generator.session, generator.io, {
        maxBatch: options.generationConcurrency,
        maxQueue: options.maxQueue,
        eosIds: generator.eosIds,
        onStep: onBatch,
      });
    } else if (model.task === "text-generation") {
      const generator = model.generator;
      this.generations = new Batcher({
        maxBatchSize: 1,
        maxWaitMs: 0,
        maxQueue: options.maxQueue,
        concurrency: options.generationConcurrency,
        onBatch,
        run: async ([job]) => [await generator.run(job!.prepared, this.random, job!.signal)],
      });
    } else {
      const classifier = model.classifier;
      this.classifications = new Batcher({
        maxBatchSize: options.maxBatchSize,
        maxWaitMs: options.batchWindowMs,
        maxQueue: options.maxQueue,
        concurrency: 1,
        onBatch,
        run: (items) => classifier.runBatch(items),
      });
    }
  }

  get task(): LoadedModel["task"] {
    return this.model.task;
  }

  private get queue(): { depth: number; inFlight: number } {
    return (this.decoder ?? this.generations ?? this.classifications)!;
  }

  get queueDepth(): number {
    return this.queue.depth;
  }

  get inFlight(): number {
    return this.queue.inFlight;
  }

  async respond(request: ResponsesRequest, signal?: AbortSignal): Promise<ServiceResult> {
    if (this.model.task === "text-generation") {
      const generator = this.model.generator;
      const prepared = generator.prepare(request);
      const outcome = this.decoder
        ? generator.outcome(
            prepared,
            await this.decoder.submit(generator.job(prepared, this.random, signal)),
          )
        : await this.generations!.submit({ prepared, signal }, signal);
      this.metrics.timeToFirstToken.observe(outcome.firstTokenMs / 1000);
      return { task: "text-generation", outcome };
    }
    const prepared = this.model.classifier.prepare(request);
    const scores = await this.classifications!.submit(prepared, signal);
    return { task: "zero-shot-classification", scores, inputTokens: prepared.inputTokens };
  }

  /** One small request through the whole path, so the first caller does not pay for it. */
  async warmup(): Promise<void> {
    const request = {
      model: "warmup",
      input: "Warm up.",
      instructions: "a, b",
      max_output_tokens: 2,
      temperature: 0,
      truncation: "auto",
      parallel_tool_calls: true,
      store: true,
    } as const;
    await this.respond(request);
  }

  close(): void {
    this.decoder?.close();
    this.generations?.close();
    this.classifications?.close();
  }
}
