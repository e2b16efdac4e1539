import type { Admitted, AdmissionQueue } from "../engine/admission-queue.js";
import {
  PaddedBatchCache,
  SharedBatchCache,
  type BatchCache,
  type CacheLimits,
} from "./batch-cache.js";
import {
  boundPresents,
  decoderFeeds,
  readDecoderOutputs,
  type DecoderSession,
} from "./decoder-feeds.js";
import { prefill, PREFILL_CHUNK_TOKENS } from "./prefill.js";
import type { DecoderIO } from "./decoder-io.js";
import type { DecodeJob, Generated } from "./generate.js";
import { hasRoom, preemptionVictims, type Room } from "./preemption.js";
import type { PrefixCache } from "./prefix-cache.js";
import { releaseOutputs } from "./release-outputs.js";
import { shouldStop, type StopReason } from "./stopping.js";

/**
 * Continuous batching for decoders with a KV cache, fed by the admission
 * queue. A new sequence is prefilled on its own, in position-aligned chunks
 * (prefill.ts; so its first token is exactly the single-sequence result,
 * cached or not), then joins the running batch: every
 * step feeds each sequence's last token in ONE session.run over the batch's
 * cache (see batch-cache.ts for its two layouts). A finished sequence leaves
 * at once; a place in the batch is taken from the queue only when free and
 * when the cache budget holds the newcomer's prompt plus its output limit
 * beside every running sequence's, so the cache never outgrows its budget.
 *
 * Decoding is bound by reading the weights once per step, so a step for
 * sixteen sequences costs far less than sixteen steps.
 *
 * With a prefix cache, a prefill starts from the longest stored prefix of
 * its prompt (whole chunks) and feeds only the rest; the whole chunks its
 * prefill computed are stored for the next prompt that starts with them (see
 * prefix-cache.ts). Positions fed by decode steps are never stored: a decode
 * step computes them with other shapes than a prefill would, so a prompt
 * reusing them would not be the computation it is without the cache.
 *
 * Interactive sequences never queue behind batch ones (issue 17): when the
 * interactive request at the head of the queue has no room, the youngest
 * batch sequences leave the batch at the step boundary (preemption.ts) and
 * are parked with a compact copy of their keys and values, their sampled
 * token not yet fed, and their sampler (whose random source is the
 * request's own). A parked sequence resumes before any new batch request is
 * taken (the front of the batch lane), when no interactive request waits
 * and it fits: its copy goes back into the batch cache as a prefill's would,
 * so it continues exactly where it stopped, with nothing recomputed, no
 * token streamed twice, and its prompt counted once. Parked copies hold at
 * most the positions those sequences held in the batch: batch sequences,
 * running and parked, never outnumber `maxBatch`, since a new one is taken
 * only when none is parked.
 */
export interface SchedulerOptions {
  /** Most sequences decoded together. */
  maxBatch: number;
  /** Most positions one sequence holds (prompt plus output): the token limit. Unbounded if unset. */
  maxSequenceTokens?: number | undefined;
  /** Most cache positions reserved across the batch. Unbounded if unset. */
  maxCacheTokens?: number | undefined;
  eosIds: ReadonlySet<number>;
  /** Called with the batch size of every decode step, for metrics. */
  onStep?: ((size: number) => void) | undefined;
  /** Keeps prefilled positions for later prompts that start with them. */
  prefixCache?: PrefixCache | undefined;
  /** Prompt tokens per prefill run (prefill.ts); the prefix cache's chunk must be the same. */
  prefillChunkTokens?: number | undefined;
  /** Called once per batch sequence that gives its place up to an interactive one, for metrics. */
  onPreempt?: (() => void) | undefined;
  /**
   * Whether batch sequences make way for interactive ones (default true);
   * false only to measure what preemption buys (test/bench/batch).
   */
  preemptBatch?: boolean | undefined;
}

interface Row {
  admitted: Admitted<DecodeJob, Generated>;
  generated: number[];
  /** The sampled token not yet fed to the model. */
  lastToken: number;
  /** Real positions of this row in the cache. */
  filled: number;
  /** Positions this row may come to hold: its prompt plus its output limit. */
  reserved: number;
  firstTokenMs: number;
  /** Prompt tokens whose positions came from the prefix cache. */
  cachedTokens: number;
  /** From the batch lane: it gives its place up to a waiting interactive sequence. */
  batch: boolean;
  /** When it was first admitted: preemption takes the youngest batch rows. */
  admittedOrder: number;
}

/** A batch row out of the batch, waiting to resume. */
interface Parked {
  row: Row;
  /** Its cache positions, compact, by past name: what the batch cache's `add` takes. */
  present: Record<string, Float32Array>;
  /** Settles it at once if its caller goes away while it waits. */
  onAbort: (() => void) | undefined;
}

/** Resolves after the event loop's next poll for I/O. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class DecodeScheduler {
  private rows: Row[] = [];
  /** Preempted batch rows, oldest admitted first: they resume before new batch work. */
  private parked: Parked[] = [];
  private cache: BatchCache;
  private looping = false;
  private admissions = 0;

  constructor(
    private readonly queue: AdmissionQueue<DecodeJob, Generated>,
    private readonly session: DecoderSession,
    private readonly io: DecoderIO,
    private readonly options: SchedulerOptions,
  ) {
    if (io.cache.length === 0) {
      throw new Error("the decode scheduler needs a graph with a KV cache");
    }
    if (options.maxBatch < 1) throw new Error("maxBatch must be at least 1");
    if (options.prefixCache && options.prefixCache.chunk !== this.chunk) {
      throw new Error(
        `the prefix cache keeps chunks of ${options.prefixCache.chunk} positions, the prefill feeds ${this.chunk}`,
      );
    }
    this.cache = this.newCache();
    queue.attach(() => {
      if (!this.looping) void this.loop();
    });
  }

  private get chunk(): number {
    return this.options.prefillChunkTokens ?? PREFILL_CHUNK_TOKENS;
  }

  private async loop(): Promise<void> {
    this.looping = true;
    try {
      for (;;) {
        const admitted = this.admissions;
        await this.fill();
        if (this.admissions > admitted) {
          // A prefill holds the event loop (onnxruntime-node runs a session
          // synchronously, from a setImmediate), so requests that arrived
          // meanwhile are still unread on their sockets. One turn of the loop
          // reads them: they are prefilled before the next decode step, as
          // the ones already queued are, rather than a step later.
          await nextTurn();
          continue;
        }
        if (this.rows.length === 0) {
          // Nothing runs, so whatever is parked fits now and no interactive
          // request waits (fill would have taken it); settled ones are gone.
          if (this.parked.length === 0) return;
          continue;
        }
        await this.step();
      }
    } finally {
      this.looping = false;
    }
  }

  /**
   * Fills free places at a step boundary: the waiting interactive request
   * first (preempting batch rows for it when it has no room), then parked
   * batch rows, then new batch requests. Take from the queue only into a free
   * place, right before the prefill: nothing taken waits here, so the queue
   * stays the only waiting room for requests not yet started.
   */
  private async fill(): Promise<void> {
    for (;;) {
      const lane = this.queue.peekPriority();
      if (lane === "interactive") {
        const victims = this.victimsFor(reservationOf(this.queue.peek()!));
        if (victims === null) return;
        if (victims.length > 0) this.preempt(victims);
      } else if (this.parked.length > 0) {
        if (!hasRoom(this.rows, this.parked[0]!.row.reserved, this.room)) return;
        this.resume(this.parked.shift()!);
        continue;
      } else if (
        lane === undefined ||
        !hasRoom(this.rows, reservationOf(this.queue.peek()!), this.room)
      ) {
        return;
      }
      const [next] = this.queue.take(1);
      if (!next) return;
      await this.admit(next);
    }
  }

  /** Rows to preempt for an interactive newcomer: none when it fits, null when it must wait. */
  private victimsFor(reserved: number): number[] | null {
    if (this.options.preemptBatch !== false) {
      return preemptionVictims(this.rows, reserved, this.room);
    }
    return hasRoom(this.rows, reserved, this.room) ? [] : null;
  }

  private get room(): Room {
    return { maxRows: this.options.maxBatch, fits: (r) => this.cache.fits(r) };
  }

  /** Moves these batch rows out of the batch, keeping what each needs to continue. */
  private preempt(victims: readonly number[]): void {
    const rows = this.rows;
    for (const b of victims) {
      const row = rows[b]!;
      const parked: Parked = { row, present: this.cache.copyRow(b), onAbort: undefined };
      const signal = row.admitted.signal;
      if (signal) {
        parked.onAbort = () => {
          const index = this.parked.indexOf(parked);
          if (index < 0) return;
          this.parked.splice(index, 1);
          this.settle(row, "aborted");
        };
        signal.addEventListener("abort", parked.onAbort, { once: true });
      }
      this.parked.push(parked);
      this.options.onPreempt?.();
    }
    this.parked.sort((a, b) => a.row.admittedOrder - b.row.admittedOrder);
    const order = this.cache.remove(victims);
    this.rows = order.map((b) => rows[b]!);
  }

  /** Puts a parked row back into the batch exactly as it left. */
  private resume(parked: Parked): void {
    const { row } = parked;
    if (parked.onAbort) row.admitted.signal?.removeEventListener("abort", parked.onAbort);
    if (row.admitted.signal?.aborted) {
      this.settle(row, "aborted");
      return;
    }
    this.cache.add(row.filled, parked.present);
    this.rows.push(row);
  }

  /** Runs the prompt alone, samples the first token, and moves the row into the batch. */
  private async admit(admitted: Admitted<DecodeJob, Generated>): Promise<void> {
    const { job } = admitted;
    const started = performance.now();
    if (job.maxNewTokens <= 0) {
      admitted.resolve({ ids: [], stopReason: "length", firstTokenMs: 0, cachedTokens: 0 });
      return;
    }
    try {
      const prompt = job.promptIds;
      const prefix = this.options.prefixCache;
      const hit = prefix?.enabled ? prefix.lookup(prompt) : null;
      const cached = hit?.tokens ?? 0;
      const prefilled = await prefill(this.session, this.io, prompt, hit?.past ?? null, this.chunk);
      const { outputs } = prefilled;
      try {
        if (prefix?.enabled) prefix.store(prompt, outputs.present);
        const token = job.sampler(outputs.lastLogits(0));
        const row: Row = {
          admitted,
          generated: [],
          lastToken: token,
          filled: prompt.length,
          reserved: prompt.length + job.maxNewTokens,
          firstTokenMs: performance.now() - started,
          cachedTokens: cached,
          batch: admitted.priority === "batch",
          admittedOrder: this.admissions++,
        };
        if (this.accept(row, token)) return;
        this.cache.add(prompt.length, outputs.present);
        this.rows.push(row);
      } finally {
        // Both caches copied what they keep, and the first token is sampled.
        prefilled.release();
      }
    } catch (error) {
      // Settling is idempotent: a row that already resolved stays resolved.
      admitted.reject(error);
    }
  }

  /** One decode step for every row in the batch. */
  private async step(): Promise<void> {
    const rows = this.rows;
    const batch = rows.length;
    try {
      const feeds = decoderFeeds(this.io, {
        rows: rows.map((r) => ({ tokens: [r.lastToken], filled: r.filled })),
        past: this.cache.past(),
      });
      this.options.onStep?.(batch);
      const bound = this.cache.bindsPresents ? boundPresents(this.io, feeds) : null;
      const results = bound
        ? await this.session.run(feeds, [this.io.logits], bound)
        : await this.session.run(feeds);
      const outputs = readDecoderOutputs(this.io, results, batch);
      this.cache.advance(outputs.present);
      const finished: number[] = [];
      rows.forEach((row, b) => {
        row.filled++;
        const token = row.admitted.job.sampler(outputs.lastLogits(b));
        if (this.accept(row, token)) finished.push(b);
      });
      // Every row has sampled. With bound presents the graph wrote the new
      // positions into the cache's own buffers, so no output is read again;
      // otherwise the presents are the next past and only the logits go.
      const logits = results[this.io.logits];
      releaseOutputs(bound ? results : logits ? { logits } : {}, feeds);
      if (finished.length > 0) {
        const order = this.cache.remove(finished);
        this.rows = order.map((b) => rows[b]!);
      }
    } catch (error) {
      // A failed step leaves the cache in an unknown state: fail the batch, keep serving.
      for (const row of rows) row.admitted.reject(error);
      this.rows = [];
      this.cache = this.newCache();
    }
  }

  private newCache(): BatchCache {
    const limits: CacheLimits = {
      maxRows: this.options.maxBatch,
      maxSequenceTokens: this.options.maxSequenceTokens ?? Infinity,
      maxTotalTokens: this.options.maxCacheTokens ?? Infinity,
    };
    return this.io.layout === "aligned" && this.io.shareBuffer
      ? new SharedBatchCache(this.io, limits)
      : new PaddedBatchCache(this.io, limits);
  }

  /**
   * Records a sampled token; resolves the row and returns true when it is done.
   * Every token of every sequence passes here once, and so to its stream.
   */
  private accept(row: Row, token: number): boolean {
    const isEos = this.options.eosIds.has(token);
    if (!isEos) {
      row.generated.push(token);
      row.admitted.job.onToken?.(token);
    }
    row.lastToken = token;
    const stop = shouldStop(token, row.generated.length, {
      maxNewTokens: row.admitted.job.maxNewTokens,
      eosIds: this.options.eosIds,
      signal: row.admitted.signal,
    });
    if (!stop) return false;
    this.settle(row, stop);
    return true;
  }

  private settle(row: Row, stopReason: StopReason): void {
    row.admitted.resolve({
      ids: row.generated,
      stopReason,
      firstTokenMs: row.firstTokenMs,
      cachedTokens: row.cachedTokens,
    });
  }
}

/** Positions a job reserves in the cache: its prompt plus its output limit. */
function reservationOf(job: DecodeJob): number {
  return job.promptIds.length + job.maxNewTokens;
}
