import type { PastCache } from "./decoder-feeds.js";
import type { DecoderIO } from "./decoder-io.js";
import { alignRows, type RowSource } from "./kv-cache.js";
import { releaseBuffers } from "./release-outputs.js";
import { SharedKvCache } from "./shared-kv-cache.js";

/**
 * The KV cache of a batch of sequences, as the decode scheduler sees it,
 * whatever the graph's layout: rows come in from a prefill, every step feeds
 * the cache and takes its result, finished rows leave. Two kinds:
 *
 * - `PaddedBatchCache` (Optimum exports): each step's present outputs become
 *   the next past; rows are left-padded; admitting or dropping a row rebuilds
 *   the tensors. Tensors it replaces are freed at once (release-outputs.ts).
 * - `SharedBatchCache` (onnxruntime-genai graphs that share past and present):
 *   one buffer per layer, bound as past and present, written in place by the
 *   graph; see SharedKvCache.
 */
export interface CacheLimits {
  /** Most sequences decoded together. */
  maxRows: number;
  /** Most positions one sequence may hold: the prompt plus its output. */
  maxSequenceTokens: number;
  /** Most positions reserved across the batch. */
  maxTotalTokens: number;
}

export interface BatchCache {
  readonly rows: number;
  /** True when the graph writes into the fed buffers: bind the presents to them. */
  readonly bindsPresents: boolean;
  /** Whether sequences reserving these many positions each fit together. */
  fits(reservations: readonly number[]): boolean;
  /** Appends a row from a prefill's present outputs (by past name, each [1, heads, length, dim]). */
  add(length: number, present: Readonly<Record<string, Float32Array>>): void;
  /** The cache to feed the next decode step (with room for it). */
  past(): PastCache;
  /** Takes a decode step's result: its present outputs, by past name. */
  advance(present: Readonly<Record<string, Float32Array>>): void;
  /** Drops the rows at `finished`; returns the new order (`order[new]` is the old index). */
  remove(finished: readonly number[]): number[];
  /**
   * Row `row`'s real positions, copied compact (by past name, each [1, heads,
   * length, dim]): what `add` takes to bring the row back exactly as it was.
   */
  copyRow(row: number): Record<string, Float32Array>;
}

/** Positions a padded cache holds per row: the longest row's. */
export class PaddedBatchCache implements BatchCache {
  readonly bindsPresents = false;
  private cache: PastCache = { length: 0, tensors: {} };
  private filled: number[] = [];

  constructor(
    private readonly io: DecoderIO,
    private readonly limits: CacheLimits,
  ) {}

  get rows(): number {
    return this.filled.length;
  }

  fits(reservations: readonly number[]): boolean {
    if (reservations.length > this.limits.maxRows) return false;
    const longest = Math.max(0, ...reservations);
    if (longest > this.limits.maxSequenceTokens) return false;
    return reservations.length * longest <= this.limits.maxTotalTokens;
  }

  add(length: number, present: Readonly<Record<string, Float32Array>>): void {
    const target = Math.max(this.cache.length, length);
    const next = this.rebuild(
      (name) => [
        ...this.filled.map((filled, row) => this.source(name, row, filled)),
        { data: tensorOf(present, name), row: 0, length, filled: length },
      ],
      target,
    );
    this.replace(next);
    this.filled.push(length);
  }

  past(): PastCache {
    return this.cache;
  }

  advance(present: Readonly<Record<string, Float32Array>>): void {
    this.replace({ length: this.cache.length + 1, tensors: present });
    this.filled = this.filled.map((filled) => filled + 1);
  }

  remove(finished: readonly number[]): number[] {
    const gone = new Set(finished);
    const kept = this.filled.map((_, b) => b).filter((b) => !gone.has(b));
    const filled = kept.map((b) => this.filled[b]!);
    const length = Math.max(0, ...filled);
    const next = this.rebuild(
      (name) => kept.map((b, i) => this.source(name, b, filled[i]!)),
      length,
    );
    this.replace(next);
    this.filled = filled;
    return kept;
  }

  copyRow(row: number): Record<string, Float32Array> {
    const filled = this.filled[row];
    if (filled === undefined) throw new Error(`the cache has no row ${row}`);
    const shape = { heads: this.io.kvHeads, headDim: this.io.headDim };
    const tensors: Record<string, Float32Array> = {};
    for (const { pastName } of this.io.cache) {
      tensors[pastName] = alignRows([this.source(pastName, row, filled)], shape, filled);
    }
    return tensors;
  }

  /**
   * The cache's tensors are its own (a rebuild's copies, or a step's presents
   * that nothing else reads), and nothing runs on them once replaced (steps
   * and rebuilds take turns): free them now. Left to V8 they are external
   * memory until a mark-compact finds them dead, the whole batch's cache at
   * every step; on SmolLM2 int8, four streams of 64 tokens ran about 3 full
   * collections per burst and took 1.12x as long (docs/runtime.md).
   */
  private replace(next: PastCache): void {
    const previous = this.cache;
    this.cache = next;
    releaseBuffers(Object.values(previous.tensors), Object.values(next.tensors));
  }

  private source(name: string, row: number, filled: number): RowSource {
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

/** Capacity of a shared cache grows in this many positions at a time. */
export const SHARED_CACHE_CHUNK = 32;

export class SharedBatchCache implements BatchCache {
  readonly bindsPresents = true;
  private readonly cache: SharedKvCache;

  constructor(
    private readonly io: DecoderIO,
    limits: CacheLimits,
  ) {
    this.cache = new SharedKvCache(
      { names: io.cache.map((c) => c.pastName), kvHeads: io.kvHeads, headDim: io.headDim },
      { chunk: SHARED_CACHE_CHUNK, ...limits },
    );
  }

  get rows(): number {
    return this.cache.rows;
  }

  fits(reservations: readonly number[]): boolean {
    return this.cache.fits(reservations);
  }

  add(length: number, present: Readonly<Record<string, Float32Array>>): void {
    this.cache.add(length, (name) => tensorOf(present, name));
  }

  past(): PastCache {
    this.cache.reserveStep();
    const tensors: Record<string, Float32Array> = {};
    for (const { pastName } of this.io.cache) tensors[pastName] = this.cache.view(pastName);
    return { length: this.cache.capacity, tensors };
  }

  /** The graph wrote the new positions into the buffers; the outputs are copies, unused (the step releases them). */
  advance(): void {
    this.cache.advance();
  }

  remove(finished: readonly number[]): number[] {
    return this.cache.remove(finished);
  }

  copyRow(row: number): Record<string, Float32Array> {
    const tensors: Record<string, Float32Array> = {};
    for (const { pastName } of this.io.cache) tensors[pastName] = this.cache.copyRow(row, pastName);
    return tensors;
  }
}

function tensorOf(tensors: Readonly<Record<string, Float32Array>>, name: string): Float32Array {
  const tensor = tensors[name];
  if (!tensor) throw new Error(`the cache has no '${name}' tensor`);
  return tensor;
}
