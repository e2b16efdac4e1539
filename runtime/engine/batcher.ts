import { RuntimeErrors } from "../errors.js";

/**
 * The one home for queueing, batching and overload. Requests wait in one
 * bounded queue; a batch is formed when `maxBatchSize` requests are waiting
 * or the oldest has waited `maxWaitMs`, and at most `concurrency` batches run
 * at once. A full queue fails fast with 429 instead of growing memory.
 *
 * Classification uses batches of many requests; generation uses batches of
 * one with bounded concurrency. Both go through this class.
 */
export interface BatcherOptions<I, O> {
  maxBatchSize: number;
  maxWaitMs: number;
  /** Requests allowed to wait (not counting those running). */
  maxQueue: number;
  concurrency: number;
  run: (items: I[]) => Promise<O[]>;
  /** Called with each batch's size, for metrics. */
  onBatch?: (size: number) => void;
}

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

export class Batcher<I, O> {
  private readonly queue: Pending<I, O>[] = [];
  private running = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly options: BatcherOptions<I, O>) {
    if (options.maxBatchSize < 1 || options.concurrency < 1) {
      throw new Error("maxBatchSize and concurrency must be at least 1");
    }
  }

  /** Requests waiting for a slot. */
  get depth(): number {
    return this.queue.length;
  }

  get inFlight(): number {
    return this.running;
  }

  submit(item: I, signal?: AbortSignal): Promise<O> {
    if (this.closed) return Promise.reject(RuntimeErrors.notReady());
    if (this.queue.length >= this.options.maxQueue) {
      return Promise.reject(RuntimeErrors.overloaded(1));
    }
    return new Promise<O>((resolve, reject) => {
      const pending: Pending<I, O> = { item, resolve, reject, signal, onAbort: undefined };
      if (signal) {
        // A caller that went away should not cost a model run.
        pending.onAbort = () => {
          const index = this.queue.indexOf(pending);
          if (index >= 0) {
            this.queue.splice(index, 1);
            reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
          }
        };
        signal.addEventListener("abort", pending.onAbort, { once: true });
      }
      this.queue.push(pending);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.running >= this.options.concurrency || this.queue.length === 0) return;
    if (this.queue.length >= this.options.maxBatchSize || this.options.maxWaitMs <= 0) {
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
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.options.maxBatchSize);
      for (const pending of batch) {
        if (pending.onAbort) pending.signal?.removeEventListener("abort", pending.onAbort);
      }
      this.running++;
      this.options.onBatch?.(batch.length);
      void this.execute(batch);
      // Only full batches go at once; a partial one waits out its window.
      if (this.queue.length < this.options.maxBatchSize && this.options.maxWaitMs > 0) break;
    }
    this.schedule();
  }

  private async execute(batch: Pending<I, O>[]): Promise<void> {
    try {
      const results = await this.options.run(batch.map((pending) => pending.item));
      batch.forEach((pending, i) => pending.resolve(results[i]!));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.running--;
      // Whoever waited while the model was busy has waited long enough.
      if (this.queue.length > 0 && this.running < this.options.concurrency) this.flush();
    }
  }

  /** Stops taking requests; those already queued still run. */
  close(): void {
    this.closed = true;
  }
}
