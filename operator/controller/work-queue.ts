/**
 * The controller's work queue, with the guarantees of client-go's
 * rate-limited queue that a level-triggered reconciler relies on:
 *
 * - a key is queued at most once, however many events name it (events are
 *   hints: the reconciler reads the current state, not the event);
 * - a key is never handed to two workers at once; one added while it is
 *   being processed is queued again when that worker finishes;
 * - a failed key comes back after a per-key exponential backoff (5 ms
 *   doubling to 5 minutes by default), reset by `forget` after a success,
 *   so one broken object never starves the others or hammers the API server.
 */
export interface WorkQueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Called whenever the number of queued keys changes (the depth metric). */
  onDepth?: (depth: number) => void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  /** Added while processing: requeued by done(). */
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(private readonly options: WorkQueueOptions = {}) {
    this.baseDelayMs = options.baseDelayMs ?? 5;
    this.maxDelayMs = options.maxDelayMs ?? 300_000;
  }

  get depth(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.processing.add(key);
      waiter(key);
      return;
    }
    this.queued.add(key);
    this.queue.push(key);
    this.options.onDepth?.(this.queue.length);
  }

  /** Adds the key after a delay; when it is already due sooner, the sooner time stands. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const due = Date.now() + delayMs;
    const existing = this.timers.get(key);
    if (existing) {
      if (existing.due <= due) return;
      clearTimeout(existing.timer);
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, { timer, due });
  }

  /** Adds the key after its next backoff step; returns the delay chosen. */
  addRateLimited(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** failures);
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears the key's backoff after a successful reconcile. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key to process, or undefined once the queue shuts down. */
  async get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      this.options.onDepth?.(this.queue.length);
      return key;
    }
    if (this.shuttingDown) return undefined;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks the key processed; requeues it if it was added meanwhile. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.delete(key)) this.add(key);
  }

  /** Stops handing out keys; waiting workers get undefined. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
  }

  get inFlight(): number {
    return this.processing.size;
  }
}
