import { int64Tensor, type TensorData } from "../engine/session.js";

/**
 * Right-pads token sequences into [batch, longest] tensors. Encoders attend
 * only where the mask is 1, so padding never changes a row's result.
 */
export interface PaddedBatch {
  inputIds: TensorData;
  attentionMask: TensorData;
  tokenTypeIds: TensorData;
  length: number;
}

export function padBatch(
  rows: ReadonlyArray<{ ids: readonly number[]; typeIds: readonly number[] }>,
  padId: number,
): PaddedBatch {
  const length = Math.max(1, ...rows.map((row) => row.ids.length));
  const ids = new BigInt64Array(rows.length * length).fill(BigInt(padId));
  const mask = new BigInt64Array(rows.length * length);
  const types = new BigInt64Array(rows.length * length);
  rows.forEach((row, r) => {
    const base = r * length;
    for (let i = 0; i < row.ids.length; i++) {
      ids[base + i] = BigInt(row.ids[i]!);
      mask[base + i] = 1n;
      types[base + i] = BigInt(row.typeIds[i] ?? 0);
    }
  });
  const dims = [rows.length, length];
  return {
    inputIds: int64Tensor(ids, dims),
    attentionMask: int64Tensor(mask, dims),
    tokenTypeIds: int64Tensor(types, dims),
    length,
  };
}
