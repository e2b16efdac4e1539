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
import type { PrefixCache } from "./prefix-cache.js";
import { releaseOutputs } from "./release-outputs.js";
import { shouldStop } from "./stopping.js";

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
}

export class DecodeScheduler {
  private rows: Row[] = [];
  private cache: BatchCache;
  private looping = false;

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
        // Take from the queue only into free places, right before the prefill:
        // nothing taken waits here, so the queue stays the only waiting room.
        while (this.rows.length < this.options.maxBatch && this.nextFits()) {
          const [next] = this.queue.take(1);
          if (!next) break;
          await this.admit(next);
        }
        if (this.rows.length === 0) return;
        await this.step();
      }
    } finally {
      this.looping = false;
    }
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

  /**
   * Whether the oldest waiting sequence fits the cache beside the running
   * ones. A sequence alone always does: the token limit bounds it.
   */
  private nextFits(): boolean {
    const job = this.queue.peek();
    if (!job) return false;
    if (this.rows.length === 0) return true;
    const reservations = this.rows.map((r) => r.reserved);
    return this.cache.fits([...reservations, job.promptIds.length + job.maxNewTokens]);
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
    row.admitted.resolve({
      ids: row.generated,
      stopReason: stop,
      firstTokenMs: row.firstTokenMs,
      cachedTokens: row.cachedTokens,
    });
    return true;
  }
}
