import type { Admitted, AdmissionQueue, Queued } from "./admission-queue.js";

/**
 * Runs requests from an admission queue in batches: a batch is formed when
 * `maxBatchSize` requests wait or the oldest has waited `maxWaitMs`, and at
 * most `concurrency` batches run at once. Classification uses batches of many
 * requests and one run at a time; generation on a graph without a KV cache
 * uses batches of one, `concurrency` sequences side by side.
 *
 * Queueing, overload and cancellation while waiting belong to the queue; this
 * class only decides when to take and how many.
 */
export interface BatchExecutorOptions<J, R> {
  maxBatchSize: number;
  maxWaitMs: number;
  concurrency: number;
  /** One model run for the batch; one result per request, in order. */
  run: (batch: readonly Queued<J>[]) => Promise<R[]>;
  /** Called with each batch's size, for metrics. */
  onBatch?: ((size: number) => void) | undefined;
  /**
   * Milliseconds a batch-priority request waits, while interactive traffic
   * is about, for an interactive request to share its step (the queue's
   * `batchHoldMs`); 0 (the default) never holds. For executors that run one
   * step at a time: an interactive request that arrives while a step of
   * batch requests alone runs waits for it.
   */
  batchHoldMs?: number | undefined;
}

/**
 * The hold of one-step-at-a-time executors: at a steady interactive rate
 * above a hundred a second, held batch requests ride along with an
 * interactive one; below, each waits 10 ms and runs alone.
 */
export const BATCH_HOLD_MS = 10;

export class BatchExecutor<J, R> {
  private running = 0;
  private timer: NodeJS.Timeout | null = null;
  private holdTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly queue: AdmissionQueue<J, R>,
    private readonly options: BatchExecutorOptions<J, R>,
  ) {
    if (options.maxBatchSize < 1 || options.concurrency < 1) {
      throw new Error("maxBatchSize and concurrency must be at least 1");
    }
    queue.attach(() => this.schedule());
  }

  private schedule(): void {
    if (this.running >= this.options.concurrency || this.queue.depth === 0) return;
    if (this.held()) return;
    if (this.queue.depth >= this.options.maxBatchSize || this.options.maxWaitMs <= 0) {
      this.flush();
      return;
    }
    // Not unref'd: a request waiting for its batch must keep the process alive.
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.flush();
    }, this.options.maxWaitMs);
  }

  private flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.running < this.options.concurrency) {
      if (this.held()) break;
      const batch = this.queue.take(this.options.maxBatchSize);
      if (batch.length === 0) break;
      this.running++;
      this.options.onBatch?.(batch.length);
      void this.execute(batch);
      // Only full batches go at once; a partial one waits out its window.
      if (this.queue.depth < this.options.maxBatchSize && this.options.maxWaitMs > 0) break;
    }
    this.schedule();
  }

  /** True while only batch requests wait and should wait for company (then woken later). */
  private held(): boolean {
    const hold = this.queue.batchHoldMs(this.options.batchHoldMs ?? 0);
    if (hold <= 0) return false;
    // Not unref'd, as the batch window's timer.
    this.holdTimer ??= setTimeout(() => {
      this.holdTimer = null;
      this.flush();
    }, hold);
    return true;
  }

  private async execute(batch: Admitted<J, R>[]): Promise<void> {
    try {
      const results = await this.options.run(batch);
      if (results.length !== batch.length) {
        throw new Error(`a batch of ${batch.length} returned ${results.length} results`);
      }
      batch.forEach((admitted, i) => admitted.resolve(results[i] as R));
    } catch (error) {
      for (const admitted of batch) admitted.reject(error);
    } finally {
      this.running--;
      // Whoever waited while the model was busy has waited long enough.
      if (this.queue.depth > 0) this.flush();
    }
  }
}
