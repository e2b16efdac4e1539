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
 * Two layouts (DecoderIO.layout). `padded`, the Optimum export's: every
 * row's real past positions sit at the END of the (left-padded) cache, so all
 * rows append at the same index; `attention_mask` covers past plus new
 * positions and hides each row's padding; `position_ids` count each row's
 * real positions. `aligned`, onnxruntime-genai's: every row's positions sit
 * at the START of its cache row and the graph writes the new ones right
 * after; the mask's width is the cache's (past length, or past plus new when
 * the cache grows) and each row's ones count its positions, which is all the
 * graph reads from it. With `shareBuffer`, the caller binds each present
 * output to its past buffer (`boundPresents`) and the graph writes in place.
 * Seam for later: a prefix KV cache is a first step whose `past` is not empty.
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
  if (io.layout === "aligned" && io.attentionMask) {
    // The cache's width: a shared buffer's capacity, or past plus new when it grows.
    const width = Math.max(pastLength, ...rows.map((row) => row.filled + fed));
    const mask = new BigInt64Array(batch * width);
    rows.forEach((row, b) => mask.fill(1n, b * width, b * width + row.filled + fed));
    feeds[io.attentionMask] = int64Tensor(mask, [batch, width]);
  } else if (io.attentionMask) {
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

/**
 * The present outputs bound to the past buffers they extend, for a graph
 * that shares them (`shareBuffer`): it writes each step's new positions in
 * place, so the cache needs nothing from the step's outputs.
 */
export function boundPresents(
  io: DecoderIO,
  feeds: Readonly<Record<string, TensorData>>,
): Record<string, TensorData> {
  const bound: Record<string, TensorData> = {};
  for (const entry of io.cache) {
    const past = feeds[entry.pastName];
    if (!past) throw new Error(`no '${entry.pastName}' feed to bind '${entry.presentName}' to`);
    bound[entry.presentName] = past;
  }
  return bound;
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
