import {
  float32Tensor,
  int64Tensor,
  type ModelSession,
  type TensorData,
} from "../engine/session.js";
import type { DecoderIO } from "./decoder-io.js";

/**
 * The one place that turns a decoder step (each row's new tokens, where they
 * sit, the cache they attend to) into the graph's feeds, and the graph's
 * outputs back into logits rows and the next cache. Both decode loops (one
 * sequence in `generate.ts`, many in `decode-scheduler.ts`) go through it.
 *
 * Layout: the Optimum export's. Every row's real past positions sit at the
 * END of the (left-padded) cache, so all rows append at the same index;
 * `attention_mask` covers past plus new positions and hides each row's
 * padding; `position_ids` count each row's real positions. Seams for later:
 * a layout without `position_ids` (onnxruntime-genai's, positions taken from
 * the mask) is a second branch in `maskAndPositions`; a prefix KV cache is a
 * first step whose `past` is not empty.
 */
/** What a decode loop needs of a session: one run (the model's, or a recorder around it in tests). */
export type DecoderSession = Pick<ModelSession, "run">;

export interface DecoderRow {
  /** The tokens this row feeds now: the prompt on a prefill, one token per decode step. */
  tokens: readonly number[];
  /** Real positions this row already has in the cache (its padding excluded). */
  filled: number;
}

/** Cache tensors by past input name, each [batch, kvHeads, length, headDim]. */
export interface PastCache {
  /** Padded length of every tensor (dim 2); each row's real positions are its last `filled`. */
  length: number;
  tensors: Readonly<Record<string, Float32Array>>;
}

export interface DecoderStep {
  /** Every row feeds the same number of tokens. */
  rows: readonly DecoderRow[];
  /** Null: nothing cached yet (a prefill), or a graph without a cache. */
  past: PastCache | null;
}

export function decoderFeeds(io: DecoderIO, step: DecoderStep): Record<string, TensorData> {
  const batch = step.rows.length;
  const fed = step.rows[0]?.tokens.length ?? 0;
  const pastLength = step.past?.length ?? 0;
  if (batch === 0 || fed === 0) throw new Error("a decoder step needs at least one token");
  for (const row of step.rows) {
    if (row.tokens.length !== fed) throw new Error("every row of a step feeds as many tokens");
    if (row.filled > pastLength) throw new Error("a row has more positions than the cache");
  }

  const ids = new BigInt64Array(batch * fed);
  step.rows.forEach((row, b) => row.tokens.forEach((id, i) => (ids[b * fed + i] = BigInt(id))));
  const feeds: Record<string, TensorData> = { [io.inputIds]: int64Tensor(ids, [batch, fed]) };
  Object.assign(feeds, maskAndPositions(io, step.rows, pastLength, fed));
  for (const entry of io.cache) {
    const data = step.past?.tensors[entry.pastName] ?? new Float32Array(0);
    const expected = batch * io.kvHeads * pastLength * io.headDim;
    if (data.length !== expected) {
      throw new Error(`'${entry.pastName}' holds ${data.length} values, not ${expected}`);
    }
    feeds[entry.pastName] = float32Tensor(data, [batch, io.kvHeads, pastLength, io.headDim]);
  }
  return feeds;
}

function maskAndPositions(
  io: DecoderIO,
  rows: readonly DecoderRow[],
  pastLength: number,
  fed: number,
): Record<string, TensorData> {
  const feeds: Record<string, TensorData> = {};
  const batch = rows.length;
  if (io.attentionMask) {
    const width = pastLength + fed;
    const mask = new BigInt64Array(batch * width);
    // Left padding: a row's real positions are the last `filled` of the past.
    rows.forEach((row, b) => mask.fill(1n, b * width + pastLength - row.filled, (b + 1) * width));
    feeds[io.attentionMask] = int64Tensor(mask, [batch, width]);
  }
  if (io.positionIds) {
    const positions = new BigInt64Array(batch * fed);
    rows.forEach((row, b) => {
      for (let i = 0; i < fed; i++) positions[b * fed + i] = BigInt(row.filled + i);
    });
    feeds[io.positionIds] = int64Tensor(positions, [batch, fed]);
  }
  return feeds;
}

export interface DecoderOutputs {
  /** Row `b`'s logits at its last fed position, as a view (no copy). */
  lastLogits(row: number): Float32Array;
  /** The cache to feed next: the present outputs under their past names. */
  present: Record<string, Float32Array>;
}

export function readDecoderOutputs(
  io: DecoderIO,
  outputs: Record<string, TensorData>,
  batch: number,
): DecoderOutputs {
  const logits = outputs[io.logits];
  if (!logits) throw new Error(`the graph returned no '${io.logits}' output`);
  const data = logits.data as Float32Array;
  const vocab = logits.dims[logits.dims.length - 1] ?? 0;
  const perRow = data.length / batch;
  const present: Record<string, Float32Array> = {};
  for (const entry of io.cache) {
    const tensor = outputs[entry.presentName];
    if (!tensor) throw new Error(`the graph returned no '${entry.presentName}' output`);
    present[entry.pastName] = tensor.data as Float32Array;
  }
  return {
    lastLogits: (row) => data.subarray((row + 1) * perRow - vocab, (row + 1) * perRow),
    present,
  };
}
