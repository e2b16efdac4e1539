import type { Logger } from "../../lib/logger.js";
import { attemptsExhausted, backoffDelayMs, type RetryPolicy } from "./backoff.js";
import type { AckOutcome } from "./journal-lines.js";
import { OutboxJournals } from "./outbox-journals.js";

export type OutboxSend<T> = (
  record: T,
  idempotencyKey: string,
  options: { signal: AbortSignal },
) => Promise<void>;

/** Hooks for metrics; see outbox-metrics.ts for the prom-client binding. */
export interface OutboxMetrics {
  delivered?(): void;
  failedAttempt?(retryable: boolean): void;
  deadLettered?(): void;
  pending?(count: number): void;
}

export interface DurableOutboxOptions<T> {
  /** Folder of the journals; one process owns it (a pod's own volume). */
  dir: string;
  /** File name stem: `<name>.records.jsonl`, `.acks.jsonl`, `.dead.jsonl`. */
  name: string;
  send: OutboxSend<T>;
  /** Default: every error is retryable, since dropping a record is the worse failure. */
  isRetryable?: (error: unknown) => boolean;
  retry: RetryPolicy;
  logger: Logger;
  /** Sends in flight at once; default 4. */
  concurrency?: number;
  /** Compact once this many records are acked, even if others are pending; default 1000. */
  compactAfterAcks?: number;
  /** With nothing pending, compact once this many are acked; default 100. */
  compactWhenIdleAfter?: number;
  /** Validates a record read back from disk; one that fails is dead-lettered. */
  parse?: (value: unknown) => T;
  metrics?: OutboxMetrics;
  now?: () => number;
  random?: () => number;
}

interface Entry<T> {
  key: string;
  at: number;
  record: T;
  attempts: number;
  nextAttemptAt: number;
  inFlight: boolean;
}

/**
 * A durable outbox: records that must reach another service (usage for
 * billing, payment settlements) are journaled to disk and fsynced before
 * `append` resolves, then delivered in the background until the receiver
 * confirms them.
 *
 * Guarantees: a record whose `append` resolved is delivered at least once,
 * across crashes and restarts, with the same idempotency key on every attempt,
 * so a receiver that dedupes on the key counts it exactly once. A record the
 * receiver rejects for good (non-retryable, or out of attempts) is parked in
 * the dead-letter file and logged, never dropped.
 *
 * Delivery: up to `concurrency` sends at once, oldest first. A retryable
 * failure delays that record (exponential backoff with jitter) and also gates
 * the whole outbox, so a receiver that is down gets one probe per backoff
 * interval rather than a retry storm; the first success reopens the gate.
 */
export class DurableOutbox<T> {
  private readonly options: DurableOutboxOptions<T>;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly concurrency: number;
  private journals: OutboxJournals | undefined;
  private opening: Promise<void> | undefined;
  private readonly entries = new Map<string, Entry<T>>();
  private readonly acked = new Set<string>();
  private readonly appending = new Map<string, Promise<void>>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private state: "new" | "open" | "running" | "closed" = "new";
  private consecutiveFailures = 0;
  private gateUntil = 0;
  private wakeTimer: NodeJS.Timeout | undefined;
  private compactionQueued = false;
  private idleWaiters: (() => void)[] = [];

  constructor(options: DurableOutboxOptions<T>) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.concurrency = Math.max(1, options.concurrency ?? 4);
  }

  /** Opens the journals and replays them. Appends work from here; delivery waits for start(). */
  open(): Promise<void> {
    this.opening ??= this.replay();
    return this.opening;
  }

  /** Opens if needed and starts delivering. */
  async start(): Promise<void> {
    await this.open();
    if (this.state !== "open") return;
    this.state = "running";
    this.pump();
  }

  /**
   * Journals a record and resolves once it is on disk. The caller answers its
   * client only after this: a crash later loses nothing. A key already
   * journaled (pending, or delivered since the last compaction) is not added
   * twice.
   */
  async append(idempotencyKey: string, record: T): Promise<void> {
    if (this.state === "closed") throw new Error(`outbox ${this.options.name} is closed`);
    if (!this.journals) await this.open();
    const journals = this.journals!;
    if (this.entries.has(idempotencyKey) || this.acked.has(idempotencyKey)) return;
    const inProgress = this.appending.get(idempotencyKey);
    if (inProgress) return inProgress;
    const at = this.now();
    const written = journals
      .appendRecord({ key: idempotencyKey, at, record }, () => {
        // Runs as soon as the line is durable, inside the journal queue, so a
        // compaction queued after this append always sees the entry.
        this.entries.set(idempotencyKey, this.newEntry(idempotencyKey, at, record));
        this.reportPending();
      })
      .finally(() => this.appending.delete(idempotencyKey));
    this.appending.set(idempotencyKey, written);
    await written;
    this.pump();
  }

  /** Records journaled and not yet delivered or dead-lettered. */
  pending(): number {
    return this.entries.size;
  }

  /** Resolves when nothing is pending (or at once if nothing is). */
  whenIdle(): Promise<void> {
    if (this.entries.size === 0 && this.appending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Stops delivering and closes the journals. With `drainTimeoutMs`, first
   * keeps delivering for up to that long so a clean shutdown leaves little
   * behind; whatever is left is sent after the next start. Sends still in
   * flight are aborted; they stay pending, not acked.
   */
  async close(options: { drainTimeoutMs?: number } = {}): Promise<void> {
    if (this.state === "closed") return;
    if (options.drainTimeoutMs && this.state === "running") {
      await Promise.race([this.whenIdle(), delay(options.drainTimeoutMs)]);
    }
    this.state = "closed";
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.abort.abort();
    await Promise.allSettled([...this.inFlight]);
    await Promise.allSettled([...this.appending.values()]);
    if (this.opening) await this.opening.catch(() => undefined);
    await this.journals?.close();
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private async replay(): Promise<void> {
    const { dir, name, logger } = this.options;
    const { journals, replay: replayed, tornBytes } = await OutboxJournals.open(dir, name);
    this.journals = journals;
    if (tornBytes > 0) {
      logger.warn({ outbox: name, bytes: tornBytes }, "outbox journal had a torn last line; cut");
    }
    if (replayed.corruptLines > 0) {
      logger.error(
        { outbox: name, lines: replayed.corruptLines },
        "outbox journal lines unreadable; skipped",
      );
    }
    for (const key of replayed.acked) this.acked.add(key);
    const invalid: Entry<T>[] = [];
    for (const line of replayed.pending) {
      let record: T;
      try {
        record = this.options.parse ? this.options.parse(line.record) : (line.record as T);
      } catch {
        invalid.push(this.newEntry(line.key, line.at, line.record as T));
        continue;
      }
      this.entries.set(line.key, this.newEntry(line.key, line.at, record));
    }
    this.state = "open";
    this.reportPending();
    if (this.entries.size > 0)
      logger.info({ outbox: name, pending: this.entries.size }, "outbox replayed");
    for (const entry of invalid)
      await this.deadLetter(entry, new Error("record fails validation on replay"));
  }

  private newEntry(key: string, at: number, record: T): Entry<T> {
    return { key, at, record, attempts: 0, nextAttemptAt: 0, inFlight: false };
  }

  /** Starts every send that may start now, and arms the timer for the next. */
  private pump(): void {
    if (this.state !== "running") return;
    const now = this.now();
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    let wakeAt = Infinity;
    if (now < this.gateUntil) {
      wakeAt = this.gateUntil;
    } else {
      // After failures, probe with one send until one succeeds (half-open).
      const limit = this.consecutiveFailures > 0 ? 1 : this.concurrency;
      for (const entry of this.entries.values()) {
        if (this.inFlight.size >= limit) break;
        if (entry.inFlight) continue;
        if (entry.nextAttemptAt > now) {
          wakeAt = Math.min(wakeAt, entry.nextAttemptAt);
          continue;
        }
        this.launch(entry);
      }
    }
    if (wakeAt !== Infinity && this.inFlight.size === 0) {
      this.wakeTimer = setTimeout(() => this.pump(), Math.max(0, wakeAt - now));
      this.wakeTimer.unref();
    }
  }

  private launch(entry: Entry<T>): void {
    entry.inFlight = true;
    entry.attempts += 1;
    const attempt = this.options
      .send(entry.record, entry.key, { signal: this.abort.signal })
      .then(
        () => this.onDelivered(entry),
        (error: unknown) => this.onFailed(entry, error),
      )
      .catch((error: unknown) =>
        this.options.logger.error(
          { outbox: this.options.name, key: entry.key, err: String(error) },
          "outbox bookkeeping failed",
        ),
      )
      .finally(() => {
        entry.inFlight = false;
        this.inFlight.delete(attempt);
        this.pump();
      });
    this.inFlight.add(attempt);
  }

  private async onDelivered(entry: Entry<T>): Promise<void> {
    this.consecutiveFailures = 0;
    this.gateUntil = 0;
    try {
      await this.ack(entry, "delivered");
    } catch (error) {
      // The record reached the receiver but the ack is not on disk: it stays
      // pending and is sent again later; the receiver's dedupe absorbs it.
      entry.nextAttemptAt = this.now() + this.options.retry.maxDelayMs;
      throw error;
    }
    this.options.metrics?.delivered?.();
  }

  private async onFailed(entry: Entry<T>, error: unknown): Promise<void> {
    if (this.state === "closed") return; // aborted by close(): stays pending for the next start
    const retryable = (this.options.isRetryable ?? (() => true))(error);
    this.options.metrics?.failedAttempt?.(retryable);
    if (!retryable || attemptsExhausted(entry.attempts, this.options.retry)) {
      await this.deadLetter(entry, error);
      return;
    }
    const now = this.now();
    this.consecutiveFailures += 1;
    entry.nextAttemptAt = now + backoffDelayMs(entry.attempts, this.options.retry, this.random);
    this.gateUntil =
      now + backoffDelayMs(this.consecutiveFailures, this.options.retry, this.random);
    this.options.logger.warn(
      { outbox: this.options.name, key: entry.key, attempts: entry.attempts, err: describe(error) },
      "outbox delivery failed; will retry",
    );
  }

  private async deadLetter(entry: Entry<T>, error: unknown): Promise<void> {
    const journals = this.journals!;
    const line = {
      key: entry.key,
      at: this.now(),
      attempts: entry.attempts,
      error: describe(error),
      record: entry.record,
    };
    await journals.appendDeadLetter(line);
    await this.ack(entry, "dead");
    this.options.metrics?.deadLettered?.();
    this.options.logger.error(
      { outbox: this.options.name, key: entry.key, attempts: entry.attempts, err: line.error },
      "outbox record parked in the dead-letter file",
    );
  }

  private async ack(entry: Entry<T>, outcome: AckOutcome): Promise<void> {
    await this.journals!.appendAck(entry.key, outcome, this.now(), () => {
      this.entries.delete(entry.key);
      this.acked.add(entry.key);
      this.reportPending();
    });
    this.maybeCompact();
    if (this.entries.size === 0 && this.appending.size === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /**
   * Compacts the journals when everything is delivered (cheap: both files
   * become empty) or after many acks (so a never-idle outbox does not grow
   * forever). Queued behind in-progress appends, so it sees them.
   */
  private maybeCompact(): void {
    const threshold = this.options.compactAfterAcks ?? 1000;
    const allDone = this.entries.size === 0 && this.appending.size === 0;
    if (this.compactionQueued || this.acked.size === 0) return;
    // Compaction costs four fsyncs: when idle it waits for a handful of acks
    // instead of running after every request that drains the queue.
    const needed = allDone
      ? Math.min(threshold, this.options.compactWhenIdleAfter ?? 100)
      : threshold;
    if (this.acked.size < needed) return;
    this.compactionQueued = true;
    void this.journals!.compact(
      () => [...this.entries.values()].map((e) => ({ key: e.key, at: e.at, record: e.record })),
      () => this.acked.clear(),
    )
      .catch((error: unknown) =>
        this.options.logger.error(
          { outbox: this.options.name, err: describe(error) },
          "outbox compaction failed",
        ),
      )
      .finally(() => {
        this.compactionQueued = false;
      });
  }

  private reportPending(): void {
    this.options.metrics?.pending?.(this.entries.size);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
