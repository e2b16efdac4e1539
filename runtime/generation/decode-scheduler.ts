import type { Admitted, AdmissionQueue } from "../engine/admission-queue.js";
import {
  decoderFeeds,
  readDecoderOutputs,
  type DecoderSession,
  type PastCache,
} from "./decoder-feeds.js";
import type { DecoderIO } from "./decoder-io.js";
import type { DecodeJob, Generated } from "./generate.js";
import { alignRows, type RowSource } from "./kv-cache.js";
import { shouldStop } from "./stopping.js";

/**
 * Continuous batching for decoders with a KV cache, fed by the admission
 * queue. A new sequence is prefilled on its own (so its first token is
 * exactly the single-sequence result), then joins the running batch: every
 * step feeds each sequence's last token in ONE session.run, with a shared
 * left-padded cache, an attention mask that hides each row's padding, and
 * per-row position ids. A finished sequence leaves at once and the cache is
 * compacted; a place in the batch is taken from the queue only when free.
 *
 * Decoding is bound by reading the weights once per step, so a step for
 * sixteen sequences costs far less than sixteen steps.
 */
export interface SchedulerOptions {
  /** Most sequences decoded together. */
  maxBatch: number;
  eosIds: ReadonlySet<number>;
  /** Called with the batch size of every decode step, for metrics. */
  onStep?: ((size: number) => void) | undefined;
}

interface Row {
  admitted: Admitted<DecodeJob, Generated>;
  generated: number[];
  /** The sampled token not yet fed to the model. */
  lastToken: number;
  /** Real positions of this row in the cache. */
  filled: number;
  firstTokenMs: number;
}

const EMPTY: PastCache = { length: 0, tensors: {} };

export class DecodeScheduler {
  private rows: Row[] = [];
  private cache: PastCache = EMPTY;
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
    queue.attach(() => {
      if (!this.looping) void this.loop();
    });
  }

  private async loop(): Promise<void> {
    this.looping = true;
    try {
      for (;;) {
        // Take from the queue only into free places, right before the prefill:
        // nothing taken waits here, so the queue stays the only waiting room.
        while (this.rows.length < this.options.maxBatch) {
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
      admitted.resolve({ ids: [], stopReason: "length", firstTokenMs: 0 });
      return;
    }
    try {
      const prompt = job.promptIds;
      const feeds = decoderFeeds(this.io, { rows: [{ tokens: prompt, filled: 0 }], past: null });
      const outputs = readDecoderOutputs(this.io, await this.session.run(feeds), 1);
      const token = job.sampler(outputs.lastLogits(0));
      const row: Row = {
        admitted,
        generated: [],
        lastToken: token,
        filled: prompt.length,
        firstTokenMs: performance.now() - started,
      };
      if (this.accept(row, token)) return;

      const length = Math.max(this.cache.length, prompt.length);
      this.cache = this.rebuild(
        (name) => [
          ...this.rows.map((r, i) => this.sourceOf(name, i, r.filled)),
          {
            data: tensorOf(outputs.present, name),
            row: 0,
            length: prompt.length,
            filled: prompt.length,
          },
        ],
        length,
      );
      this.rows.push(row);
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
        past: this.cache,
      });
      this.options.onStep?.(batch);
      const outputs = readDecoderOutputs(this.io, await this.session.run(feeds), batch);
      this.cache = { length: this.cache.length + 1, tensors: outputs.present };
      const kept: number[] = [];
      rows.forEach((row, b) => {
        row.filled++;
        const token = row.admitted.job.sampler(outputs.lastLogits(b));
        if (!this.accept(row, token)) kept.push(b);
      });
      if (kept.length < batch) this.compact(kept);
    } catch (error) {
      // A failed step leaves the cache in an unknown state: fail the batch, keep serving.
      for (const row of rows) row.admitted.reject(error);
      this.rows = [];
      this.cache = EMPTY;
    }
  }

  /**
   * Records a sampled token; resolves the row and returns true when it is done.
   * Every token of every sequence passes here once: where streaming will hook in.
   */
  private accept(row: Row, token: number): boolean {
    const isEos = this.options.eosIds.has(token);
    if (!isEos) row.generated.push(token);
    row.lastToken = token;
    const stop = shouldStop(token, row.generated.length, {
      maxNewTokens: row.admitted.job.maxNewTokens,
      eosIds: this.options.eosIds,
      signal: row.admitted.signal,
    });
    if (!stop) return false;
    row.admitted.resolve({ ids: row.generated, stopReason: stop, firstTokenMs: row.firstTokenMs });
    return true;
  }

  /** Keeps only the rows at `kept`, trimming padding no remaining row needs. */
  private compact(kept: number[]): void {
    const rows = kept.flatMap((b) => this.rows[b] ?? []);
    const length = Math.max(0, ...rows.map((r) => r.filled));
    this.cache = this.rebuild(
      (name) => kept.map((b, i) => this.sourceOf(name, b, rows[i]?.filled ?? 0)),
      length,
    );
    this.rows = rows;
  }

  /** Row `row` of the current cache tensor `name`. */
  private sourceOf(name: string, row: number, filled: number): RowSource {
    return { data: tensorOf(this.cache.tensors, name), row, length: this.cache.length, filled };
  }

  private rebuild(sourcesOf: (pastName: string) => RowSource[], length: number): PastCache {
    const shape = { heads: this.io.kvHeads, headDim: this.io.headDim };
    const tensors: Record<string, Float32Array> = {};
    for (const { pastName } of this.io.cache) {
      tensors[pastName] = alignRows(sourcesOf(pastName), shape, length);
    }
    return { length, tensors };
  }
}

function tensorOf(tensors: Readonly<Record<string, Float32Array>>, name: string): Float32Array {
  const tensor = tensors[name];
  if (!tensor) throw new Error(`the cache has no '${name}' tensor`);
  return tensor;
}
