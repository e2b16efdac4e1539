import type { Logger } from "../../lib/logger.js";
import type { OperatorMetrics } from "../metrics.js";
import { errorText } from "../../lib/error-text.js";
import type { ReconcileResult } from "./reconciler.js";
import { WorkQueue } from "./work-queue.js";

/**
 * The worker pool around the reconciler: N workers take keys from the queue;
 * a failed reconcile is retried with the key's backoff, a successful one
 * clears it. Every model is also requeued after `resyncMs`, so a missed
 * event or a change outside the watched objects is corrected without one.
 */
export interface ControllerOptions {
  reconcile: (key: string) => Promise<ReconcileResult>;
  workers: number;
  logger: Logger;
  metrics: OperatorMetrics;
  resyncMs?: number;
}

export class Controller {
  readonly queue: WorkQueue;
  private running: Promise<void>[] = [];
  private stopped = false;

  constructor(private readonly options: ControllerOptions) {
    this.queue = new WorkQueue({ onDepth: (d) => options.metrics.queueDepth.set(d) });
  }

  enqueue(key: string): void {
    this.queue.add(key);
  }

  start(): void {
    for (let i = 0; i < this.options.workers; i++) this.running.push(this.work());
  }

  /** Stops taking keys and waits for the reconciles in flight to finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.shutDown();
    await Promise.all(this.running);
  }

  private async work(): Promise<void> {
    const { logger, metrics } = this.options;
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      const end = metrics.duration.startTimer();
      try {
        const result = await this.options.reconcile(key);
        this.queue.forget(key);
        metrics.reconciles.inc({ result: "success" });
        if (result.changed > 0 || result.statusWritten) {
          logger.debug({ model: key, ...result }, "reconciled");
        }
        if (this.options.resyncMs !== undefined) this.queue.addAfter(key, this.options.resyncMs);
      } catch (err) {
        metrics.reconciles.inc({ result: "error" });
        metrics.errors.inc();
        if (!this.stopped) {
          const retryInMs = this.queue.addRateLimited(key);
          logger.warn({ model: key, err: errorText(err), retryInMs }, "reconcile failed; retrying");
        }
      } finally {
        end();
        this.queue.done(key);
      }
    }
  }
}
