import { RuntimeErrors } from "../errors.js";
import {
  float32Tensor,
  int64Tensor,
  type ModelSession,
  type TensorData,
} from "../engine/session.js";
import type { DecoderIO } from "./decoder-io.js";
import type { Generated } from "./generate.js";
import { alignRows, type RowSource } from "./kv-cache.js";
import type { Sampler } from "./sampler.js";
import { shouldStop } from "./stopping.js";

/**
 * Continuous batching for decoders with a KV cache. A new sequence is
 * prefilled on its own (so its first token is exactly the single-sequence
 * result), then joins the running batch: every step feeds each sequence's
 * last token in ONE session.run, with a shared left-padded cache, an
 * attention mask that hides each row's padding, and per-row position ids.
 * A finished sequence leaves at once and the cache is compacted.
 *
 * Decoding is bound by reading the weights once per step, so a step for
 * sixteen sequences costs far less than sixteen steps.
 */
export interface DecodeJob {
  promptIds: readonly number[];
  maxNewTokens: number;
  sampler: Sampler;
  signal?: AbortSignal | undefined;
}

export interface SchedulerOptions {
  /** Most sequences decoded together. */
  maxBatch: number;
  /** Requests allowed to wait for a place in the batch. */
  maxQueue: number;
  eosIds: ReadonlySet<number>;
  /** Called with the batch size of every decode step, for metrics. */
  onStep?: (size: number) => void;
}

interface Pending {
  job: DecodeJob;
  resolve: (value: Generated) => void;
  reject: (error: unknown) => void;
}

interface Row extends Pending {
  generated: number[];
  /** The sampled token not yet fed to the model. */
  lastToken: number;
  /** Real positions of this row in the cache. */
  filled: number;
  firstTokenMs: number;
}

export class DecodeScheduler {
  private readonly waiting: Pending[] = [];
  private rows: Row[] = [];
  private cache: Record<string, Float32Array> = {};
  /** Padded length of every cache tensor (dim 2). */
  private length = 0;
  private looping = false;
  private closed = false;

  constructor(
    private readonly session: ModelSession,
    private readonly io: DecoderIO,
    private readonly options: SchedulerOptions,
  ) {
    if (io.cache.length === 0)
      throw new Error("the decode scheduler needs a graph with a KV cache");
  }

  get depth(): number {
    return this.waiting.length;
  }

  get inFlight(): number {
    return this.rows.length;
  }

  submit(job: DecodeJob): Promise<Generated> {
    if (this.closed) return Promise.reject(RuntimeErrors.notReady());
    if (this.waiting.length >= this.options.maxQueue) {
      return Promise.reject(RuntimeErrors.overloaded(1));
    }
    return new Promise<Generated>((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      if (!this.looping) void this.loop();
    });
  }

  close(): void {
    this.closed = true;
  }

  private async loop(): Promise<void> {
    this.looping = true;
    try {
      while (this.waiting.length > 0 || this.rows.length > 0) {
        while (this.waiting.length > 0 && this.rows.length < this.options.maxBatch) {
          await this.admit(this.waiting.shift()!);
        }
        if (this.rows.length > 0) await this.step();
      }
    } finally {
      this.looping = false;
    }
  }

  /** Runs the prompt alone, samples the first token, and moves the row into the batch. */
  private async admit(pending: Pending): Promise<void> {
    const { job } = pending;
    if (job.signal?.aborted) {
      pending.reject(job.signal.reason instanceof Error ? job.signal.reason : new Error("aborted"));
      return;
    }
    const started = performance.now();
    const prompt = job.promptIds;
    if (job.maxNewTokens <= 0) {
      pending.resolve({ ids: [], stopReason: "length", firstTokenMs: 0 });
      return;
    }
    let outputs: Record<string, TensorData>;
    try {
      const feeds: Record<string, TensorData> = {
        [this.io.inputIds]: int64Tensor(BigInt64Array.from(prompt, BigInt), [1, prompt.length]),
      };
      if (this.io.attentionMask) {
        feeds[this.io.attentionMask] = int64Tensor(new BigInt64Array(prompt.length).fill(1n), [
          1,
          prompt.length,
        ]);
      }
      if (this.io.positionIds) {
        feeds[this.io.positionIds] = int64Tensor(
          BigInt64Array.from(prompt, (_, i) => BigInt(i)),
          [1, prompt.length],
        );
      }
      for (const entry of this.io.cache) {
        feeds[entry.pastName] = float32Tensor(new Float32Array(0), [
          1,
          this.io.kvHeads,
          0,
          this.io.headDim,
        ]);
      }
      outputs = await this.session.run(feeds);
    } catch (error) {
      pending.reject(error);
      return;
    }
    const logits = outputs[this.io.logits]!;
    const vocab = logits.dims[2]!;
    const data = logits.data as Float32Array;
    const token = job.sampler(data.subarray((prompt.length - 1) * vocab, prompt.length * vocab));
    const row: Row = {
      ...pending,
      generated: [],
      lastToken: token,
      filled: prompt.length,
      firstTokenMs: performance.now() - started,
    };
    if (this.accept(row, token)) return;

    const length = Math.max(this.length, prompt.length);
    const sources = (name: string, present: Float32Array): RowSource[] => [
      ...this.rows.map((r, i) => ({
        data: this.cache[name]!,
        row: i,
        length: this.length,
        filled: r.filled,
      })),
      { data: present, row: 0, length: prompt.length, filled: prompt.length },
    ];
    this.cache = this.rebuild(
      (name, presentName) => sources(name, outputs[presentName]!.data as Float32Array),
      length,
    );
    this.length = length;
    this.rows.push(row);
  }

  /** One decode step for every row in the batch. */
  private async step(): Promise<void> {
    const rows = this.rows;
    const batch = rows.length;
    const past = this.length;
    const feeds: Record<string, TensorData> = {
      [this.io.inputIds]: int64Tensor(
        BigInt64Array.from(rows, (r) => BigInt(r.lastToken)),
        [batch, 1],
      ),
    };
    if (this.io.attentionMask) {
      const mask = new BigInt64Array(batch * (past + 1));
      rows.forEach((r, b) => mask.fill(1n, b * (past + 1) + past - r.filled, (b + 1) * (past + 1)));
      feeds[this.io.attentionMask] = int64Tensor(mask, [batch, past + 1]);
    }
    if (this.io.positionIds) {
      feeds[this.io.positionIds] = int64Tensor(
        BigInt64Array.from(rows, (r) => BigInt(r.filled)),
        [batch, 1],
      );
    }
    for (const entry of this.io.cache) {
      feeds[entry.pastName] = float32Tensor(this.cache[entry.pastName]!, [
        batch,
        this.io.kvHeads,
        past,
        this.io.headDim,
      ]);
    }
    this.options.onStep?.(batch);

    let outputs: Record<string, TensorData>;
    try {
      outputs = await this.session.run(feeds);
    } catch (error) {
      // A failed step leaves the cache in an unknown state: fail the batch, keep serving.
      for (const row of rows) row.reject(error);
      this.rows = [];
      this.cache = {};
      this.length = 0;
      return;
    }
    for (const entry of this.io.cache) {
      this.cache[entry.pastName] = outputs[entry.presentName]!.data as Float32Array;
    }
    this.length = past + 1;
    const logits = outputs[this.io.logits]!.data as Float32Array;
    const vocab = logits.length / batch;
    const kept: number[] = [];
    rows.forEach((row, b) => {
      row.filled++;
      const token = row.job.sampler(logits.subarray(b * vocab, (b + 1) * vocab));
      if (!this.accept(row, token)) kept.push(b);
    });
    if (kept.length < batch) this.compact(kept);
  }

  /** Records a sampled token; resolves the row and returns true when it is done. */
  private accept(row: Row, token: number): boolean {
    const isEos = this.options.eosIds.has(token);
    if (!isEos) row.generated.push(token);
    row.lastToken = token;
    const stop = shouldStop(token, row.generated.length, {
      maxNewTokens: row.job.maxNewTokens,
      eosIds: this.options.eosIds,
      signal: row.job.signal,
    });
    if (!stop) return false;
    row.resolve({ ids: row.generated, stopReason: stop, firstTokenMs: row.firstTokenMs });
    return true;
  }

  /** Keeps only the rows at `kept`, trimming padding no remaining row needs. */
  private compact(kept: number[]): void {
    const rows = kept.map((b) => this.rows[b]!);
    const length = Math.max(0, ...rows.map((r) => r.filled));
    this.cache = this.rebuild(
      (name) =>
        kept.map((b) => ({
          data: this.cache[name]!,
          row: b,
          length: this.length,
          filled: this.rows[b]!.filled,
        })),
      length,
    );
    this.rows = rows;
    this.length = length;
  }

  private rebuild(
    sourcesOf: (pastName: string, presentName: string) => RowSource[],
    length: number,
  ): Record<string, Float32Array> {
    const shape = { heads: this.io.kvHeads, headDim: this.io.headDim };
    const next: Record<string, Float32Array> = {};
    for (const entry of this.io.cache) {
      next[entry.pastName] = alignRows(sourcesOf(entry.pastName, entry.presentName), shape, length);
    }
    return next;
  }
}
