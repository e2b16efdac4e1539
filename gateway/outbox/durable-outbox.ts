import type { Logger } from "../../lib/logger.js";
import { attemptsExhausted, backoffDelayMs, type RetryPolicy } from "./backoff.js";
import type { AckOutcome } from "./journal-lines.js";
import type { JournalSync } from "./journal-file.js";
import { journalPath, OutboxJournals } from "./outbox-journals.js";

export type OutboxSend<T> = (
  record: T,
  idempotencyKey: string,
  options: { signal: AbortSignal },
) => Promise<void>;

/** One record of a batch, with the key the receiver dedupes it on. */
export interface OutboxItem<T> {
  key: string;
  record: T;
}

/**
 * Delivers several records in one call. Resolving means the receiver has all
 * of them; rejecting means it has none it will count twice (it dedupes on the
 * keys), so the whole batch may be sent again.
 */
export type OutboxSendBatch<T> = (
  items: readonly OutboxItem<T>[],
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
  /**
   * When appended records reach the disk; default `"always"` (before
   * `append` resolves). With an interval, `append` resolves once the record
   * is written, which a crash of the process cannot undo, and a crash of the
   * machine can lose the last interval.
   */
  journalSync?: JournalSync;
  /** Delivers one record at a time. Give this or `sendBatch`. */
  send?: OutboxSend<T>;
  /** Delivers up to `maxBatch` records at a time. Give this or `send`. */
  sendBatch?: OutboxSendBatch<T>;
  /** Most records per `sendBatch` call; default 100. */
  maxBatch?: number;
  /**
   * How long a new record may wait for others to share its batch, in ms;
   * default 0. Retries and replayed records never wait.
   */
  lingerMs?: number;
  /** Default: every error is retryable, since dropping a record is the worse failure. */
  isRetryable?: (error: unknown) => boolean;
  retry: RetryPolicy;
  logger: Logger;
  /** Sends (single or batch) in flight at once; default 4. */
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
  /** Sent alone from now on: a batch holding it was refused for good. */
  solo: boolean;
}

/**
 * A durable outbox: records that must reach another service (usage for
 * billing, payment settlements) are journaled to a file before `append`
 * resolves (and synced to disk as `journalSync` says), then delivered in the
 * background until the receiver confirms them.
 *
 * Guarantees: a record whose `append` resolved is delivered at least once,
 * across crashes and restarts of the process (and of the machine, for what
 * was synced), with the same idempotency key on every attempt,
 * so a receiver that dedupes on the key counts it exactly once. A record the
 * receiver rejects for good (non-retryable, or out of attempts) is parked in
 * the dead-letter file and logged, never dropped.
 *
 * Delivery: up to `concurrency` sends at once, oldest first; with
 * `sendBatch`, each send carries up to `maxBatch` records, and a new record
 * may linger briefly so that records arriving one by one still share a
 * send. A batch the receiver refuses for good is split: each of its records
 * is sent alone, so only the bad one is dead-lettered. A retryable
 * failure delays that record (exponential backoff with jitter) and also gates
 * the whole outbox, so a receiver that is down gets one probe per backoff
 * interval rather than a retry storm; the first success reopens the gate.
 */
export class DurableOutbox<T> {
  private readonly options: DurableOutboxOptions<T>;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly concurrency: number;
  private readonly sendBatch: OutboxSendBatch<T>;
  private readonly maxBatch: number;
  private readonly lingerMs: number;
  private wakeAt = Infinity;
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
    const { send, sendBatch } = options;
    if (send && !sendBatch) {
      this.sendBatch = (items, o) => send(items[0]!.record, items[0]!.key, o);
      this.maxBatch = 1;
    } else if (sendBatch && !send) {
      this.sendBatch = sendBatch;
      this.maxBatch = Math.max(1, options.maxBatch ?? 100);
    } else {
      throw new Error(`outbox ${options.name}: give exactly one of send and sendBatch`);
    }
    this.lingerMs = Math.max(0, options.lingerMs ?? 0);
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
   * Journals a record and resolves once it is written (and on disk, if the
   * journal syncs always). The caller answers its client only after this: a
   * crash of the process later loses nothing. A key already
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
        // Runs as soon as the line is written, inside the journal queue, so a
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

  /** The file the records still owed wait in (until delivered, or the folder is lost). */
  recordsPath(): string {
    return journalPath(this.options.dir, this.options.name, "records");
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
    // What a clean stop leaves behind is only as safe as the folder: say how
    // much and where, since a pod deleted with its emptyDir takes it along.
    if (this.entries.size > 0) {
      this.options.logger.warn(
        { outbox: this.options.name, pending: this.entries.size, journal: this.recordsPath() },
        "outbox closed with records waiting; they are sent after the next start on this folder",
      );
    }
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private async replay(): Promise<void> {
    const { dir, name, logger } = this.options;
    const {
      journals,
      replay: replayed,
      tornBytes,
    } = await OutboxJournals.open(dir, name, {
      sync: this.options.journalSync ?? "always",
      // Not fatal: the lines are written and the sync is tried again; only a
      // crash of the machine before it succeeds could lose them.
      onSyncError: (error, path) =>
        logger.error({ outbox: name, path, err: describe(error) }, "outbox journal sync failed"),
    });
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
    return { key, at, record, attempts: 0, nextAttemptAt: 0, inFlight: false, solo: false };
  }

  /** Starts every send that may start now, and arms the timer for the next. */
  private pump(): void {
    if (this.state !== "running") return;
    const now = this.now();
    let wakeAt = Infinity;
    if (now < this.gateUntil) {
      wakeAt = this.gateUntil;
    } else {
      // After failures, probe with one send until one succeeds (half-open).
      const limit = this.consecutiveFailures > 0 ? 1 : this.concurrency;
      let batch: Entry<T>[] = [];
      for (const entry of this.entries.values()) {
        if (this.inFlight.size >= limit) break;
        if (entry.inFlight) continue;
        if (entry.nextAttemptAt > now) {
          wakeAt = Math.min(wakeAt, entry.nextAttemptAt);
          continue;
        }
        if (entry.solo) {
          this.launch([entry]);
          continue;
        }
        batch.push(entry);
        if (batch.length === this.maxBatch) {
          this.launch(batch);
          batch = [];
        }
      }
      if (batch.length > 0 && this.inFlight.size < limit) {
        // A part batch of new records waits for company, up to the linger.
        const first = batch[0]!;
        const due = first.attempts > 0 ? now : first.at + this.lingerMs;
        if (due <= now) this.launch(batch);
        else wakeAt = Math.min(wakeAt, due);
      }
    }
    this.armWake(wakeAt, now);
  }

  /**
   * One timer for the next moment a send may start (a backoff or a linger
   * ending), kept as it is when that moment has not changed: pump runs on
   * every append, and re-arming a timer each time would cost more than the
   * send. Armed even while sends are in flight, so that a lingering batch
   * never waits for a slow send to end.
   */
  private armWake(wakeAt: number, now: number): void {
    if (wakeAt === this.wakeAt && this.wakeTimer) return;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    this.wakeAt = wakeAt;
    if (wakeAt === Infinity) return;
    this.wakeTimer = setTimeout(
      () => {
        this.wakeTimer = undefined;
        this.wakeAt = Infinity;
        this.pump();
      },
      Math.max(0, wakeAt - now),
    );
    this.wakeTimer.unref();
  }

  private launch(batch: Entry<T>[]): void {
    for (const entry of batch) {
      entry.inFlight = true;
      entry.attempts += 1;
    }
    const items = batch.map((entry) => ({ key: entry.key, record: entry.record }));
    const attempt = this.sendBatch(items, { signal: this.abort.signal })
      .then(
        async () => {
          await Promise.all(batch.map((entry) => this.onDelivered(entry)));
        },
        (error: unknown) => this.onFailed(batch, error),
      )
      .catch((error: unknown) =>
        this.options.logger.error(
          { outbox: this.options.name, keys: items.length, err: String(error) },
          "outbox bookkeeping failed",
        ),
      )
      .finally(() => {
        for (const entry of batch) entry.inFlight = false;
        this.inFlight.delete(attempt);
        this.pump();
      });
    this.inFlight.add(attempt);
  }

  private async onDelivered(entry: Entry<T>): Promise<void> {
    this.consecutiveFailures = 0;
    this.gateUntil = 0;
    // Counted before the ack, so it is in the metrics once whenIdle resolves.
    this.options.metrics?.delivered?.();
    try {
      await this.ack(entry, "delivered");
    } catch (error) {
      // The record reached the receiver but the ack is not on disk: it stays
      // pending and is sent again later; the receiver's dedupe absorbs it.
      entry.nextAttemptAt = this.now() + this.options.retry.maxDelayMs;
      throw error;
    }
  }

  private async onFailed(batch: Entry<T>[], error: unknown): Promise<void> {
    if (this.state === "closed") return; // aborted by close(): stays pending for the next start
    const retryable = (this.options.isRetryable ?? (() => true))(error);
    this.options.metrics?.failedAttempt?.(retryable);
    if (!retryable && batch.length > 1) {
      // Which record the receiver refused is unknown: send each alone, so
      // that only a bad one is dead-lettered. The split costs no attempt.
      for (const entry of batch) {
        entry.solo = true;
        entry.attempts -= 1;
      }
      this.options.logger.warn(
        { outbox: this.options.name, records: batch.length, err: describe(error) },
        "outbox batch refused; sending its records one by one",
      );
      return;
    }
    const now = this.now();
    let retrying = 0;
    for (const entry of batch) {
      if (!retryable || attemptsExhausted(entry.attempts, this.options.retry)) {
        await this.deadLetter(entry, error);
        continue;
      }
      retrying += 1;
      entry.nextAttemptAt = now + backoffDelayMs(entry.attempts, this.options.retry, this.random);
    }
    if (retrying === 0) return;
    this.consecutiveFailures += 1;
    this.gateUntil =
      now + backoffDelayMs(this.consecutiveFailures, this.options.retry, this.random);
    this.options.logger.warn(
      {
        outbox: this.options.name,
        key: batch[0]!.key,
        records: batch.length,
        attempts: batch[0]!.attempts,
        // Everything that waits, and where: lost if this folder is lost first.
        pending: this.entries.size,
        journal: this.recordsPath(),
        err: describe(error),
      },
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
    this.options.metrics?.deadLettered?.();
    await this.ack(entry, "dead");
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
