/**
 * The KV cache of onnxruntime-genai decoders, batched. Its graphs (fused
 * GroupQueryAttention) read row b's past from the START of its cache row
 * (positions [0, seqlens_k[b])) and write the new positions right after,
 * where seqlens_k[b] is the row's attention-mask sum minus one; when the past
 * and present of a layer are one buffer, they write in place. So this cache
 * keeps one buffer per past input, [rows, kvHeads, capacity, headDim], with
 * each row's positions left-aligned, and hands the same buffer to the graph as
 * past and present: a step copies nothing on our side. Capacity grows (and
 * shrinks) in chunks, so buffers are rebuilt once per `chunk` steps at most.
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
  /** Capacity grows in multiples of this many positions. */
  chunk: number;
  /** Most positions one row may hold (prompt plus output). */
  maxSequenceTokens: number;
  /** Most positions allocated across rows (rows × capacity). */
  maxTotalTokens: number;
}

export class SharedKvCache {
  private buffers = new Map<string, Float32Array>();
  private rowLengths: number[] = [];
  private cap = 0;

  constructor(
    private readonly geometry: CacheGeometry,
    private readonly budget: CacheBudget,
  ) {
    if (budget.chunk < 1) throw new Error("the cache chunk must be at least one position");
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

  /** Positions allocated now, across rows. */
  get allocatedTokens(): number {
    return this.rows * this.cap;
  }

  /** The buffer fed as `name` (and bound as its present), [rows, kvHeads, capacity, headDim]. */
  buffer(name: string): Float32Array {
    const buffer = this.buffers.get(name);
    if (!buffer) throw new Error(`no cache buffer for '${name}'`);
    return buffer;
  }

  /**
   * Whether rows reserving these many positions each (the running rows' and a
   * newcomer's prompt plus its output limit) fit the total budget, with every
   * row padded to the largest reservation as the buffers are.
   */
  fits(reservations: readonly number[]): boolean {
    if (reservations.length === 0) return true;
    const longest = Math.max(...reservations);
    if (longest > this.budget.maxSequenceTokens) return false;
    return reservations.length * this.round(longest + 1) <= this.budget.maxTotalTokens;
  }

  /**
   * Appends a row holding `length` positions, copied from a prefill's present
   * outputs, each [1, kvHeads, length, headDim] (read through `present`).
   */
  add(length: number, present: (name: string) => Float32Array): void {
    const rows = this.rows + 1;
    const capacity = Math.max(this.cap, this.round(length + 1));
    const { kvHeads, headDim } = this.geometry;
    const next = this.reshaped(
      rows,
      capacity,
      this.rowLengths.map((_, b) => b),
    );
    for (const name of this.geometry.names) {
      const source = present(name);
      if (source.length !== kvHeads * length * headDim) {
        throw new Error(
          `'${name}' present holds ${source.length} values, not ${kvHeads * length * headDim}`,
        );
      }
      const target = next.get(name)!;
      for (let h = 0; h < kvHeads; h++) {
        const from = h * length * headDim;
        target.set(
          source.subarray(from, from + length * headDim),
          ((rows - 1) * kvHeads + h) * capacity * headDim,
        );
      }
    }
    this.buffers = next;
    this.cap = capacity;
    this.rowLengths = [...this.rowLengths, length];
  }

  /** Makes room for one more position in every row before a decode step. */
  reserveStep(): void {
    const needed = Math.max(0, ...this.rowLengths) + 1;
    if (needed <= this.cap) return;
    const capacity = this.round(needed);
    this.buffers = this.reshaped(
      this.rows,
      capacity,
      this.rowLengths.map((_, b) => b),
    );
    this.cap = capacity;
  }

  /** After a step: every row holds the position it just fed. */
  advance(): void {
    this.rowLengths = this.rowLengths.map((length) => length + 1);
  }

  /** Keeps only the rows at `kept` (in that order), shrinking capacity to what they need. */
  keep(kept: readonly number[]): void {
    const lengths = kept.map((b) => this.rowLengths[b]!);
    const capacity = lengths.length === 0 ? 0 : this.round(Math.max(...lengths) + 1);
    this.buffers = this.reshaped(kept.length, capacity, kept);
    this.cap = capacity;
    this.rowLengths = lengths;
  }

  /**
   * The attention mask of a step that feeds `fed` positions per row: row b has
   * ones over its length plus the fed positions, zeros after (the graph takes
   * only each row's sum and the mask's width, which is the capacity).
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

  /** New buffers of `rows` × `capacity` holding the current rows at `from`, in order. */
  private reshaped(
    rows: number,
    capacity: number,
    from: readonly number[],
  ): Map<string, Float32Array> {
    const { kvHeads, headDim } = this.geometry;
    const next = new Map<string, Float32Array>();
    for (const name of this.geometry.names) {
      const target = new Float32Array(rows * kvHeads * capacity * headDim);
      const source = this.buffers.get(name);
      from.forEach((b, r) => {
        const span = this.rowLengths[b]! * headDim;
        for (let h = 0; h < kvHeads; h++) {
          const at = (b * kvHeads + h) * this.cap * headDim;
          target.set(source!.subarray(at, at + span), (r * kvHeads + h) * capacity * headDim);
        }
      });
      next.set(name, target);
    }
    return next;
  }
}
