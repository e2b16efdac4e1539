/**
 * Moving sequences in and out of a batched KV cache. Every cache tensor is
 * [batch, heads, length, headDim] with each row's real positions at the END
 * (left padding), so all rows append their next position at the same index.
 * Pure functions over typed arrays; the decode loop owns the tensors.
 */
export interface CacheShape {
  heads: number;
  headDim: number;
}

/** Where one row of a new cache tensor comes from. */
export interface RowSource {
  data: Float32Array;
  /** Row index inside `data`. */
  row: number;
  /** Padded length of `data` (its dim 2). */
  length: number;
  /** Real positions of this row: the last `filled` of its `length`. */
  filled: number;
}

/**
 * Builds a [rows.length, heads, length, headDim] tensor holding each source
 * row's real positions right-aligned. Positions left of them are zero and
 * masked out by the attention mask. `length` must fit every row's `filled`.
 */
export function alignRows(
  sources: readonly RowSource[],
  shape: CacheShape,
  length: number,
): Float32Array {
  const { heads, headDim } = shape;
  const out = new Float32Array(sources.length * heads * length * headDim);
  sources.forEach((source, r) => {
    if (source.filled > length) throw new Error("a row does not fit the target cache length");
    const span = source.filled * headDim;
    for (let h = 0; h < heads; h++) {
      const from =
        ((source.row * heads + h) * source.length + source.length - source.filled) * headDim;
      const to = ((r * heads + h) * length + length - source.filled) * headDim;
      out.set(source.data.subarray(from, from + span), to);
    }
  });
  return out;
}
