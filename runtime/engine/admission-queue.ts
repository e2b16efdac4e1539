import type { CodedError } from "../../lib/coded-error.js";
import { RuntimeErrors } from "../errors.js";

/**
 * The one admission home of the runtime, whatever executor runs the model
 * (classification batches, one sequence per run, continuous decoding). As in
 * text-embeddings-inference's `queue.rs` and `infer.rs`: admission is bounded
 * and fails fast, the queue has one owner, an executor takes requests from
 * it in arrival order, and every request has a promise of its own.
 *
 * A request is in one of three states: waiting (here, cancellable), admitted
 * (taken by the executor, which now owns running it and settling it), or
 * settled. Overload, closing and a caller that went away while waiting are
 * answered here and nowhere else, and the load figures for metrics come from
 * here too.
 */
export interface AdmissionOptions {
  /** Requests allowed to wait (those admitted to the model are not counted). */
  maxQueue: number;
  /** Called whenever the number waiting or admitted changes (for gauges). */
  onLoad?: ((load: QueueLoad) => void) | undefined;
  /** Called with the seconds each request waited before its executor took it, and its lane. */
  onAdmit?: ((waitedSeconds: number, priority: Priority) => void) | undefined;
  /**
   * While interactive requests arrived in the last `interactiveQuietMs`, a
   * step takes batch requests for at most this share of its room (at least
   * one): an interactive request arriving mid-step then waits for a short
   * step, not a full one. Once interactive traffic is quiet, batch requests
   * fill whole steps. Default 0.25.
   */
  batchShareWhileInteractive?: number | undefined;
  /**
   * Default 250: long enough to span the gaps of any steady interactive
   * stream worth protecting, short enough that batch work takes whole steps
   * again soon after the stream ends.
   */
  interactiveQuietMs?: number | undefined;
  /** Milliseconds, monotonic; injectable for tests. */
  now?: (() => number) | undefined;
}

/**
 * Interactive requests are taken first; `batch` ones (marked by the gateway's
 * batch workers) only when no interactive request waits, so they fill idle
 * capacity and an interactive request never queues behind one. Each lane
 * has its own `maxQueue`: waiting batch work never makes interactive
 * requests overflow.
 */
export type Priority = "interactive" | "batch";

export interface QueueLoad {
  waiting: number;
  inFlight: number;
}

/** A job with the signal that says its caller went away. */
export interface Queued<J> {
  readonly job: J;
  readonly signal: AbortSignal | undefined;
}

/**
 * A request its executor has taken: the executor must settle it exactly once,
 * and stops its work at the next step when `signal` aborts.
 */
export interface Admitted<J, R> extends Queued<J> {
  /** The lane it came from: a decode scheduler preempts batch sequences, never interactive ones. */
  readonly priority: Priority;
  resolve(result: R): void;
  reject(error: unknown): void;
}

interface Waiting<J, R> {
  job: J;
  signal: AbortSignal | undefined;
  onAdmitted: (() => void) | undefined;
  arrivedAt: number;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
  onAbort: (() => void) | undefined;
}

/**
 * Why a waiting request was dropped: 499, as nginx logs a client that closed
 * its connection. Nobody reads the answer; the code keeps the hang-up out of
 * the 500s in logs and in `modelgate_runtime_requests_total`.
 */
export function abortReason(signal: AbortSignal): CodedError {
  return RuntimeErrors.clientClosed(signal.reason);
}

export class AdmissionQueue<J, R> {
  private readonly waiting: Waiting<J, R>[] = [];
  /** The batch lane: taken from only while `waiting` is empty. */
  private readonly batchWaiting: Waiting<J, R>[] = [];
  private admitted = 0;
  /** Of `admitted`, those from the interactive lane. */
  private admittedInteractive = 0;
  private closed = false;
  private lastInteractiveAt = Number.NEGATIVE_INFINITY;
  private wake: (() => void) | null = null;
  private readonly now: () => number;

  constructor(private readonly options: AdmissionOptions) {
    if (!(options.maxQueue >= 0)) throw new Error("maxQueue must be 0 or more");
    this.now = options.now ?? (() => performance.now());
  }

  /** Requests waiting for the model, in both lanes. */
  get depth(): number {
    return this.waiting.length + this.batchWaiting.length;
  }

  /** Requests the executor has taken and not yet settled. */
  get inFlight(): number {
    return this.admitted;
  }

  /** Interactive requests waiting or admitted. */
  get interactiveLoad(): number {
    return this.waiting.length + this.admittedInteractive;
  }

  /**
   * What batch work must make way for, sent on batch answers: 0 while no
   * interactive traffic is here nor arrived within `interactiveQuietMs`; 1
   * while there is some but none waits (the runtime keeps up: batch work may
   * take its share of each step); 1 + the number waiting while interactive
   * requests queue for a step (batch work must back off). Reporting the
   * waiting apart from the running lets the workers keep filling spare room
   * beside a steady stream instead of stopping for it.
   */
  get interactivePressure(): number {
    const present = this.interactiveLoad > 0 || this.interactiveRecent();
    return present ? 1 + this.waiting.length : 0;
  }

  private interactiveRecent(): boolean {
    return this.now() - this.lastInteractiveAt < (this.options.interactiveQuietMs ?? 250);
  }

  /**
   * Names the one executor that takes from this queue. `wake` is called after
   * every arrival; the executor decides whether it has room now.
   */
  attach(wake: () => void): void {
    if (this.wake) throw new Error("an admission queue has exactly one executor");
    this.wake = wake;
  }

  /**
   * `onAdmitted` is called when the executor takes the request, before it
   * runs: from then on nothing here answers it (overload, closing, a caller
   * gone while waiting), only its executor. It runs inside the executor's
   * turn, so it must be quick and must not throw.
   */
  submit(
    job: J,
    signal?: AbortSignal,
    priority: Priority = "interactive",
    onAdmitted?: () => void,
  ): Promise<R> {
    if (this.closed) return Promise.reject(RuntimeErrors.notReady());
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const lane = priority === "batch" ? this.batchWaiting : this.waiting;
    if (lane.length >= this.options.maxQueue) {
      return Promise.reject(RuntimeErrors.overloaded(1));
    }
    if (priority === "interactive") this.lastInteractiveAt = this.now();
    return new Promise<R>((resolve, reject) => {
      const entry: Waiting<J, R> = {
        job,
        signal,
        onAdmitted,
        arrivedAt: this.now(),
        resolve,
        reject,
        onAbort: undefined,
      };
      if (signal) {
        // A caller that went away leaves at once and never costs a model run.
        entry.onAbort = () => {
          const index = lane.indexOf(entry);
          if (index < 0) return;
          lane.splice(index, 1);
          this.report();
          reject(abortReason(signal));
        };
        signal.addEventListener("abort", entry.onAbort, { once: true });
      }
      lane.push(entry);
      this.report();
      this.wake?.();
    });
  }

  /** The next job to be taken, left waiting: for an executor that admits only what fits. */
  peek(): J | undefined {
    return (this.waiting[0] ?? this.batchWaiting[0])?.job;
  }

  /** The lane of the request `peek` shows, if any waits. */
  peekPriority(): Priority | undefined {
    if (this.waiting.length > 0) return "interactive";
    return this.batchWaiting.length > 0 ? "batch" : undefined;
  }

  /**
   * Admits up to `max` waiting requests: interactive ones oldest first, then
   * batch ones, fewer of them while interactive traffic is about.
   */
  take(max: number): Admitted<J, R>[] {
    const room = Math.max(0, max);
    const interactive = this.waiting.splice(0, room);
    const batch = this.batchWaiting.splice(
      0,
      Math.min(room - interactive.length, this.batchRoom(room)),
    );
    if (interactive.length + batch.length === 0) return [];
    const now = this.now();
    const admit = (isInteractive: boolean) => (entry: Waiting<J, R>) => {
      if (entry.onAbort) entry.signal?.removeEventListener("abort", entry.onAbort);
      this.options.onAdmit?.(
        (now - entry.arrivedAt) / 1000,
        isInteractive ? "interactive" : "batch",
      );
      entry.onAdmitted?.();
      return this.admit(entry, isInteractive);
    };
    const admitted = [...interactive.map(admit(true)), ...batch.map(admit(false))];
    this.report();
    return admitted;
  }

  /**
   * How much longer a step must wait for company before it takes batch
   * requests alone: while interactive traffic is about and none waits, a
   * batch request does not start a step by itself for up to `holdMs` after
   * it arrived, so that it rides in the next interactive request's step
   * instead of holding the model when that request arrives. 0: take now.
   */
  batchHoldMs(holdMs: number): number {
    const oldest = this.batchWaiting[0];
    if (!oldest || this.waiting.length > 0 || !this.interactiveRecent()) return 0;
    return Math.max(0, holdMs - (this.now() - oldest.arrivedAt));
  }

  private batchRoom(room: number): number {
    if (!this.interactiveRecent()) return room;
    const share = this.options.batchShareWhileInteractive ?? 0.25;
    return Math.min(room, Math.max(1, Math.floor(room * share)));
  }

  /** Stops taking requests (503); those already waiting still run. */
  close(): void {
    this.closed = true;
  }

  private admit(entry: Waiting<J, R>, interactive: boolean): Admitted<J, R> {
    this.admitted++;
    if (interactive) this.admittedInteractive++;
    let settled = false;
    const settle = (finish: () => void) => {
      if (settled) return;
      settled = true;
      this.admitted--;
      if (interactive) this.admittedInteractive--;
      this.report();
      finish();
    };
    return {
      job: entry.job,
      signal: entry.signal,
      priority: interactive ? "interactive" : "batch",
      resolve: (result) => settle(() => entry.resolve(result)),
      reject: (error) => settle(() => entry.reject(error)),
    };
  }

  private report(): void {
    this.options.onLoad?.({ waiting: this.depth, inFlight: this.admitted });
  }
}
