import { parseExtractionOptions, type ExtractionOptions } from "../api/entity-options.js";
import type { ResponsesRequest } from "../api/responses-request.js";
import { HttpErrors } from "../lib/http/http-errors.js";
import type {
  LabelScores,
  PreparedClassification,
  ZeroShotClassifier,
} from "./classify/classifier.js";
import { AdmissionQueue, type Priority } from "./engine/admission-queue.js";
import { BATCH_HOLD_MS, BatchExecutor } from "./engine/batch-executor.js";
import { DecodeScheduler } from "./generation/decode-scheduler.js";
import { PREFILL_CHUNK_TOKENS } from "./generation/prefill.js";
import { PrefixCache } from "./generation/prefix-cache.js";
import type { DecodeJob, Generated } from "./generation/generate.js";
import type { GenerationOutcome, TextGenerator } from "./generation/text-generator.js";
import type { EntityExtractor, ExtractedEntity, PreparedExtraction } from "./extract/extractor.js";
import { resolveExtraction, type ResolvedExtraction } from "./extract/resolve-settings.js";
import type { RuntimeMetrics } from "./metrics.js";
import type { LoadedModel } from "./model/load-model.js";

/**
 * A loaded model behind its admission queue and executor: the one object the
 * HTTP layer talks to. Preparing (tokenising, the token limit) happens on
 * arrival so that a bad request is refused before it waits in the queue.
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
  /**
   * Generation: KV cache positions the batch may reserve, across sequences
   * (each reserves its prompt plus its output limit); unset, the concurrency
   * times the token limit, so only the concurrency bounds the batch.
   */
  kvCacheTokens?: number | undefined;
  /**
   * Generation: bytes of finished sequences' keys and values kept for later
   * prompts that start with the same tokens (see generation/prefix-cache.ts);
   * 0 keeps none.
   */
  prefixCacheBytes?: number | undefined;
  /**
   * Generation: prompt tokens per prefill run, cached or not, and the unit the
   * prefix cache keeps and reuses (see generation/prefill.ts).
   */
  prefillChunkTokens?: number | undefined;
}

export const DEFAULT_THROUGHPUT: ThroughputOptions = {
  maxBatchSize: 32,
  // No wait when the model is idle: requests that arrive while a batch runs
  // form the next batch, so batches grow with load and a lone request is not delayed.
  batchWindowMs: 0,
  generationConcurrency: 8,
  maxQueue: 256,
  prefixCacheBytes: 128 * 2 ** 20,
  prefillChunkTokens: PREFILL_CHUNK_TOKENS,
};

/** What a caller of `generate` sees as the request runs (the stream route). */
export interface GenerationWatch {
  /**
   * The model has taken the request, before its prompt runs: nothing refuses
   * it with a status after this (a failure now is the generation's own).
   */
  onStart?: (() => void) | undefined;
  /**
   * Each output token as it is sampled, end-of-sequence excluded. Runs
   * inside the decode loop: quick, and never throws.
   */
  onToken?: ((id: number) => void) | undefined;
}

export type ServiceResult =
  | { task: "text-generation"; outcome: GenerationOutcome }
  | { task: "zero-shot-classification"; scores: LabelScores; inputTokens: number }
  | {
      task: "entity-extraction";
      entities: ExtractedEntity[];
      options: ExtractionOptions;
      resolved: ResolvedExtraction;
      inputTokens: number;
    };

/** Exactly what a model's task needs: its model, its admission queue, its one executor. */
export type Lane =
  | {
      task: "text-generation";
      generator: TextGenerator;
      admission: AdmissionQueue<DecodeJob, Generated>;
      /** Continuous batching on a graph with a KV cache; one sequence per run without. */
      executor: DecodeScheduler | BatchExecutor<DecodeJob, Generated>;
      /** Finished sequences' keys and values, for prompts that start with them; null without a KV cache. */
      prefixCache: PrefixCache | null;
    }
  | {
      task: "zero-shot-classification";
      classifier: ZeroShotClassifier;
      admission: AdmissionQueue<PreparedClassification, LabelScores>;
      executor: BatchExecutor<PreparedClassification, LabelScores>;
    }
  | {
      task: "entity-extraction";
      extractor: EntityExtractor;
      admission: AdmissionQueue<PreparedExtraction, ExtractedEntity[]>;
      executor: BatchExecutor<PreparedExtraction, ExtractedEntity[]>;
    };

export class ModelService {
  readonly lane: Lane;

  constructor(
    readonly model: LoadedModel,
    private readonly options: ThroughputOptions,
    private readonly metrics: RuntimeMetrics,
    private readonly random: () => number,
  ) {
    this.lane =
      model.task === "text-generation"
        ? generationLane(model.generator, options, metrics)
        : model.task === "entity-extraction"
          ? extractionLane(model.extractor, options, metrics)
          : classificationLane(model.classifier, options, metrics);
  }

  get task(): LoadedModel["task"] {
    return this.lane.task;
  }

  /**
   * The KV cache's bound, for a decoder with one: positions the batch may
   * reserve and what they take at most (float32 keys and values).
   */
  get kvCacheBudget(): { tokens: number; bytes: number } | null {
    const lane = this.lane;
    if (lane.task !== "text-generation" || !lane.generator.canBatch) return null;
    const { io, limits } = lane.generator;
    const tokens =
      this.options.kvCacheTokens ?? this.options.generationConcurrency * limits.maxTokens;
    return { tokens, bytes: tokens * io.cache.length * io.kvHeads * io.headDim * 4 };
  }

  /** Requests waiting for the model. */
  get queueDepth(): number {
    return this.lane.admission.depth;
  }

  /** What batch work makes way for (AdmissionQueue.interactivePressure). */
  get interactivePressure(): number {
    return this.lane.admission.interactivePressure;
  }

  /** Requests the model is working on. */
  get inFlight(): number {
    return this.lane.admission.inFlight;
  }

  async respond(
    request: ResponsesRequest,
    signal?: AbortSignal,
    priority: Priority = "interactive",
  ): Promise<ServiceResult> {
    const lane = this.lane;
    if (lane.task === "text-generation") {
      return {
        task: "text-generation",
        outcome: await this.generate(request, signal, {}, priority),
      };
    }
    if (lane.task === "entity-extraction") {
      const parsed = parseExtractionOptions(request.metadata);
      if (!parsed.ok) {
        const { key, message } = parsed.problem;
        throw HttpErrors.invalidRequest(`Invalid 'metadata.${key}': ${message}`, `metadata.${key}`);
      }
      const resolved = resolveExtraction(parsed.options, lane.extractor);
      const prepared = lane.extractor.prepare(request.input, resolved.settings);
      const entities = await lane.admission.submit(prepared, signal, priority);
      return {
        task: "entity-extraction",
        entities,
        options: parsed.options,
        resolved,
        inputTokens: prepared.inputTokens,
      };
    }
    const prepared = lane.classifier.prepare(request);
    const scores = await lane.admission.submit(prepared, signal, priority);
    return { task: "zero-shot-classification", scores, inputTokens: prepared.inputTokens };
  }

  /**
   * Text generation through the queue and the continuous batch, watched as
   * it goes (streaming). A token-limit refusal (420) or a full queue rejects
   * before `watch.onStart`.
   */
  async generate(
    request: ResponsesRequest,
    signal?: AbortSignal,
    watch: GenerationWatch = {},
    priority: Priority = "interactive",
  ): Promise<GenerationOutcome> {
    const lane = this.lane;
    if (lane.task !== "text-generation") throw new Error(`a ${lane.task} model does not generate`);
    const { generator } = lane;
    const prepared = generator.prepare(request);
    const job = generator.job(prepared, this.random, watch.onToken);
    const generated = await lane.admission.submit(job, signal, priority, watch.onStart);
    const outcome = generator.outcome(prepared, generated);
    this.metrics.timeToFirstToken.observe(outcome.firstTokenMs / 1000);
    if (outcome.cachedTokens > 0) {
      this.metrics.prefixCacheHits.inc();
      this.metrics.prefixCachedTokens.inc(outcome.cachedTokens);
    }
    return outcome;
  }

  /** One small request through the whole path, so the first caller does not pay for it. */
  async warmup(): Promise<void> {
    const request = {
      model: "warmup",
      input: "Warm up.",
      instructions: "a, b",
      max_output_tokens: 2,
      temperature: 0,
      truncation: "auto" as const,
      parallel_tool_calls: true,
      store: true,
    };
    const lane = this.lane;
    // A zero-shot extractor has no labels of its own: it is asked for one.
    const metadata =
      lane.task === "entity-extraction" && lane.extractor.labels === null
        ? { labels: "person" }
        : undefined;
    await this.respond({ ...request, ...(metadata ? { metadata } : {}) });
  }

  /** Stops taking requests (503); those already admitted or waiting still run. */
  close(): void {
    this.lane.admission.close();
  }
}

/** The queue's load and waits, in the runtime's metrics: the one place they come from. */
function admissionOf<J, R>(options: ThroughputOptions, metrics: RuntimeMetrics) {
  return new AdmissionQueue<J, R>({
    maxQueue: options.maxQueue,
    onLoad: ({ waiting, inFlight }) => {
      metrics.queueDepth.set(waiting);
      metrics.inFlight.set(inFlight);
    },
    onAdmit: (seconds, priority) => metrics.queueWait.observe({ priority }, seconds),
  });
}

function generationLane(
  generator: TextGenerator,
  options: ThroughputOptions,
  metrics: RuntimeMetrics,
): Lane {
  const admission = admissionOf<DecodeJob, Generated>(options, metrics);
  const onBatch = (size: number) => metrics.batchSize.observe(size);
  const { io } = generator;
  const chunk = options.prefillChunkTokens ?? PREFILL_CHUNK_TOKENS;
  const prefixCache = generator.canBatch
    ? new PrefixCache(
        {
          names: io.cache.map((c) => c.pastName),
          kvHeads: io.kvHeads,
          headDim: io.headDim,
          chunk,
        },
        options.prefixCacheBytes ?? 0,
        (bytes) => metrics.prefixCacheBytes.set(bytes),
      )
    : null;
  const executor = generator.canBatch
    ? new DecodeScheduler(admission, generator.session, generator.io, {
        maxBatch: options.generationConcurrency,
        maxSequenceTokens: generator.limits.maxTokens,
        maxCacheTokens:
          options.kvCacheTokens ?? options.generationConcurrency * generator.limits.maxTokens,
        eosIds: generator.eosIds,
        onStep: onBatch,
        prefixCache: prefixCache ?? undefined,
        prefillChunkTokens: chunk,
        onPreempt: () => metrics.preemptions.inc(),
      })
    : new BatchExecutor<DecodeJob, Generated>(admission, {
        maxBatchSize: 1,
        maxWaitMs: 0,
        concurrency: options.generationConcurrency,
        onBatch,
        run: (batch) => Promise.all(batch.map((q) => generator.decode(q.job, q.signal))),
      });
  return { task: "text-generation", generator, admission, executor, prefixCache };
}

function classificationLane(
  classifier: ZeroShotClassifier,
  options: ThroughputOptions,
  metrics: RuntimeMetrics,
): Lane {
  const admission = admissionOf<PreparedClassification, LabelScores>(options, metrics);
  const executor = new BatchExecutor(admission, {
    maxBatchSize: options.maxBatchSize,
    maxWaitMs: options.batchWindowMs,
    concurrency: 1,
    batchHoldMs: BATCH_HOLD_MS,
    onBatch: (size) => metrics.batchSize.observe(size),
    run: (batch) => classifier.runBatch(batch.map((q) => q.job)),
  });
  return { task: "zero-shot-classification", classifier, admission, executor };
}

function extractionLane(
  extractor: EntityExtractor,
  options: ThroughputOptions,
  metrics: RuntimeMetrics,
): Lane {
  const admission = admissionOf<PreparedExtraction, ExtractedEntity[]>(options, metrics);
  const executor = new BatchExecutor(admission, {
    maxBatchSize: options.maxBatchSize,
    maxWaitMs: options.batchWindowMs,
    concurrency: 1,
    batchHoldMs: BATCH_HOLD_MS,
    onBatch: (size) => metrics.batchSize.observe(size),
    run: (batch) => extractor.runBatch(batch.map((q) => q.job)),
  });
  return { task: "entity-extraction", extractor, admission, executor };
}
