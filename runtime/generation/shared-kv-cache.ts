import { releaseBuffers } from "./release-outputs.js";

/**
 * The KV cache of onnxruntime-genai decoders, batched. Their fused
 * GroupQueryAttention reads row b's past from the START of its cache row
 * (positions [0, seqlens_k[b])) and writes the new positions right after,
 * where seqlens_k[b] is the row's attention-mask sum minus one; when a layer's
 * past and present are one buffer, it writes in place. So this cache keeps
 * one buffer per past input, [rows, kvHeads, capacity, headDim], with each
 * row's positions left-aligned, and the decode loop hands the same buffer to
 * the graph as past and as present: a step copies nothing on our side.
 *
 * Buffers hold room for a power of two of rows (up to `maxRows`); the batch
 * is their first `rows` rows, so a new row is written in place and a finished
 * one is replaced by the last row (one row copied). Capacity follows the
 * longest row in chunks of positions. Growing or shrinking either rebuilds
 * the buffers: for capacity at most once per `chunk` steps, for rows a few
 * times as a batch fills.
 *
 * Pure bookkeeping over typed arrays; the decode loop owns the session.
 */
export interface CacheGeometry {
  /** Past input names; each has a matching present output. */
  names: readonly string[];
  kvHeads: number;
  headDim: number;
}

export interface CacheBudget {
  /** Most rows (sequences decoded together). */
  maxRows: number;
  /** Capacity grows in multiples of this many positions. */
  chunk: number;
  /** Most positions one row may hold (prompt plus output). */
  maxSequenceTokens: number;
  /** Most positions reserved across rows (rows × padded reservation). */
  maxTotalTokens: number;
}

export class SharedKvCache {
  private buffers = new Map<string, Float32Array>();
  private rowLengths: number[] = [];
  private cap = 0;
  /** Rows the buffers have room for. */
  private roomRows = 0;

  constructor(
    private readonly geometry: CacheGeometry,
    private readonly budget: CacheBudget,
  ) {
    if (budget.chunk < 1) throw new Error("the cache chunk must be at least one position");
    if (budget.maxRows < 1) throw new Error("the cache needs room for at least one row");
  }

  get rows(): number {
    return this.rowLengths.length;
  }

  /** Positions per row in every buffer (dim 2). */
  get capacity(): number {
    return this.cap;
  }

  /** Real positions of each row. */
  get lengths(): readonly number[] {
    return this.rowLengths;
  }

  /** Float32 values the graph reads and writes per buffer this step (rows × heads × capacity × dim). */
  get stepValues(): number {
    return this.rows * this.geometry.kvHeads * this.cap * this.geometry.headDim;
  }

  /** The batch's part of `name`'s buffer, [rows, kvHeads, capacity, headDim]: past and present. */
  view(name: string): Float32Array {
    const buffer = this.buffers.get(name);
    if (!buffer) throw new Error(`no cache buffer for '${name}'`);
    return buffer.subarray(0, this.stepValues);
  }

  /**
   * Whether rows reserving these many positions each (the running rows' and a
   * newcomer's prompt plus output limit) fit the budget, every row padded to
   * the longest as the buffers are.
   */
  fits(reservations: readonly number[]): boolean {
    if (reservations.length === 0) return true;
    if (reservations.length > this.budget.maxRows) return false;
    const longest = Math.max(...reservations);
    if (longest > this.budget.maxSequenceTokens) return false;
    return reservations.length * this.round(longest + 1) <= this.budget.maxTotalTokens;
  }

  /**
   * Appends a row holding `length` positions, copied from a prefill's present
   * outputs, each [1, kvHeads, length, headDim]; returns its index.
   */
  add(length: number, present: (name: string) => Float32Array): number {
    if (this.rows >= this.budget.maxRows) throw new Error("the cache has no free row");
    const room =
      this.rows < this.roomRows
        ? this.roomRows
        : Math.min(this.budget.maxRows, 2 ** Math.ceil(Math.log2(this.rows + 1)));
    this.resize(Math.max(this.cap, this.round(length + 1)), room);
    const { kvHeads, headDim } = this.geometry;
    const row = this.rows;
    for (const name of this.geometry.names) {
      const source = present(name);
      if (source.length !== kvHeads * length * headDim) {
        throw new Error(
          `'${name}' present holds ${source.length} values, not ${kvHeads * length * headDim}`,
        );
      }
      const target = this.buffers.get(name)!;
      for (let h = 0; h < kvHeads; h++) {
        const from = h * length * headDim;
        target.set(
          source.subarray(from, from + length * headDim),
          (row * kvHeads + h) * this.cap * headDim,
        );
      }
    }
    this.rowLengths.push(length);
    return row;
  }

  /** Row `row`'s positions in `name`'s buffer, copied compact: [1, kvHeads, length, headDim]. */
  copyRow(row: number, name: string): Float32Array {
    const buffer = this.buffers.get(name);
    if (!buffer) throw new Error(`no cache buffer for '${name}'`);
    const { kvHeads, headDim } = this.geometry;
    const length = this.rowLengths[row];
    if (length === undefined) throw new Error(`the cache has no row ${row}`);
    const out = new Float32Array(kvHeads * length * headDim);
    for (let h = 0; h < kvHeads; h++) {
      const at = (row * kvHeads + h) * this.cap * headDim;
      out.set(buffer.subarray(at, at + length * headDim), h * length * headDim);
    }
    return out;
  }

  /** Makes room for one more position in every row before a decode step. */
  reserveStep(): void {
    const needed = Math.max(0, ...this.rowLengths) + 1;
    if (needed > this.cap) this.resize(this.round(needed), this.roomRows);
  }

  /** After a step: every row holds the position it just fed. */
  advance(): void {
    for (let b = 0; b < this.rowLengths.length; b++) this.rowLengths[b]! += 1;
  }

  /**
   * Drops the rows at `finished`, filling each hole below the new row count
   * with one of the last rows, and shrinks capacity to what is left. Returns
   * the new order: `order[newIndex]` is the row's old index.
   */
  remove(finished: readonly number[]): number[] {
    const gone = new Set(finished);
    const count = this.rows - gone.size;
    const order = Array.from({ length: this.rows }, (_, b) => b).filter((b) => !gone.has(b));
    // Rows already below `count` stay put; rows above it move into the holes.
    const staying = order.filter((b) => b < count);
    const moving = order.filter((b) => b >= count);
    const holes = Array.from({ length: count }, (_, b) => b).filter((b) => gone.has(b));
    const next = [...staying];
    holes.forEach((hole, i) => {
      const from = moving[i]!;
      this.moveRow(from, hole);
      next.splice(hole, 0, from);
    });
    this.rowLengths = next.map((b) => this.rowLengths[b]!);
    const capacity = count === 0 ? 0 : this.round(Math.max(...this.rowLengths) + 1);
    this.resize(capacity, count === 0 ? 0 : this.roomRows);
    return next;
  }

  /**
   * The attention mask of a step that feeds `fed` positions per row: row b has
   * ones over its length plus the fed positions, zeros after. The graph takes
   * only each row's sum (its positions) and the mask's width (the capacity).
   */
  mask(fed = 1): BigInt64Array {
    const mask = new BigInt64Array(this.rows * this.cap);
    this.rowLengths.forEach((length, b) =>
      mask.fill(1n, b * this.cap, b * this.cap + length + fed),
    );
    return mask;
  }

  private round(positions: number): number {
    return Math.ceil(positions / this.budget.chunk) * this.budget.chunk;
  }

  private moveRow(from: number, to: number): void {
    const span = this.geometry.kvHeads * this.cap * this.geometry.headDim;
    for (const buffer of this.buffers.values()) {
      buffer.copyWithin(to * span, from * span, (from + 1) * span);
    }
  }

  /** Rebuilds every buffer with room for `rows` rows of `capacity` positions, keeping the rows. */
  private resize(capacity: number, rows: number): void {
    if (capacity === this.cap && rows === this.roomRows) return;
    const { kvHeads, headDim, names } = this.geometry;
    const next = new Map<string, Float32Array>();
    for (const name of names) {
      const target = new Float32Array(rows * kvHeads * capacity * headDim);
      const source = this.buffers.get(name);
      this.rowLengths.forEach((length, b) => {
        const span = length * headDim;
        for (let h = 0; h < kvHeads; h++) {
          const at = (b * kvHeads + h) * this.cap * headDim;
          target.set(source!.subarray(at, at + span), (b * kvHeads + h) * capacity * headDim);
        }
      });
      next.set(name, target);
    }
    // The old buffers' rows are copied and no step is running: free them now
    // rather than at a mark-compact (some MB each time the capacity grows).
    releaseBuffers(this.buffers.values());
    this.buffers = next;
    this.cap = capacity;
    this.roomRows = rows;
  }
}
