import { int64Tensor, type TensorData } from "../engine/session.js";
import type { SpanRow } from "./span-prompt.js";

/**
 * Pads rows into one GLiNER span-mode batch: tokens right-padded to the
 * longest row, and every row given the same spans (start i, end i + j for
 * j < max_width, end inclusive, in GLiNER's order: start-major) over the
 * longest row's words; span_mask is true where the span ends inside the
 * row's own words. The logits come back as [rows, words, max_width, labels].
 */
export interface SpanBatch {
  feeds: Record<string, TensorData>;
  /** Words per row in the logits (the longest row's). */
  words: number;
}

export function buildSpanFeeds(
  rows: readonly SpanRow[],
  maxWidth: number,
  padId: number,
): SpanBatch {
  const length = Math.max(1, ...rows.map((row) => row.ids.length));
  const words = Math.max(1, ...rows.map((row) => row.words));
  const spans = words * maxWidth;
  const ids = new BigInt64Array(rows.length * length).fill(BigInt(padId));
  const mask = new BigInt64Array(rows.length * length);
  const wordsMask = new BigInt64Array(rows.length * length);
  const textLengths = new BigInt64Array(rows.length);
  const spanIdx = new BigInt64Array(rows.length * spans * 2);
  const spanMask = new Uint8Array(rows.length * spans);
  rows.forEach((row, r) => {
    const base = r * length;
    for (let t = 0; t < row.ids.length; t++) {
      ids[base + t] = BigInt(row.ids[t]!);
      mask[base + t] = 1n;
      wordsMask[base + t] = BigInt(row.wordsMask[t]!);
    }
    textLengths[r] = BigInt(row.words);
    for (let start = 0; start < words; start++) {
      for (let width = 0; width < maxWidth; width++) {
        const s = r * spans + start * maxWidth + width;
        spanIdx[2 * s] = BigInt(start);
        spanIdx[2 * s + 1] = BigInt(start + width);
        spanMask[s] = start + width < row.words ? 1 : 0;
      }
    }
  });
  const tokenDims = [rows.length, length];
  return {
    feeds: {
      input_ids: int64Tensor(ids, tokenDims),
      attention_mask: int64Tensor(mask, tokenDims),
      words_mask: int64Tensor(wordsMask, tokenDims),
      text_lengths: int64Tensor(textLengths, [rows.length, 1]),
      span_idx: int64Tensor(spanIdx, [rows.length, spans, 2]),
      span_mask: { type: "bool", data: spanMask, dims: [rows.length, spans] },
    },
    words,
  };
}
