import {
  float32Tensor,
  int64Tensor,
  type ModelSession,
  type TensorData,
} from "../engine/session.js";
import type { DecoderIO } from "./decoder-io.js";
import type { Sampler } from "./sampler.js";
import { shouldStop, type StopReason, type StoppingCriteria } from "./stopping.js";

/**
 * The step loop of one sequence. With a KV cache the prompt is fed once and
 * each later step feeds one token plus the cache the previous step returned;
 * without one, the whole sequence is fed every step.
 */
export interface GenerateParams extends StoppingCriteria {
  promptIds: readonly number[];
  sampler: Sampler;
}

export interface Generated {
  ids: number[];
  stopReason: StopReason;
  /** Milliseconds until the first token was sampled. */
  firstTokenMs: number;
}

function sequenceTensor(ids: readonly number[]): TensorData {
  return int64Tensor(
    BigInt64Array.from(ids, (id) => BigInt(id)),
    [1, ids.length],
  );
}

function rangeTensor(from: number, to: number): TensorData {
  const data = new BigInt64Array(to - from);
  for (let i = 0; i < data.length; i++) data[i] = BigInt(from + i);
  return int64Tensor(data, [1, data.length]);
}

function onesTensor(length: number): TensorData {
  return int64Tensor(new BigInt64Array(length).fill(1n), [1, length]);
}

function emptyCache(io: DecoderIO): Record<string, TensorData> {
  const cache: Record<string, TensorData> = {};
  for (const entry of io.cache) {
    cache[entry.pastName] = float32Tensor(new Float32Array(0), [1, io.kvHeads, 0, io.headDim]);
  }
  return cache;
}

/** The logits row of the last position, as a view (no copy). */
function lastRow(logits: TensorData): Float32Array {
  const data = logits.data as Float32Array;
  const vocab = logits.dims[logits.dims.length - 1]!;
  const positions = data.length / vocab;
  return data.subarray((positions - 1) * vocab, positions * vocab);
}

export async function generate(
  session: ModelSession,
  io: DecoderIO,
  params: GenerateParams,
): Promise<Generated> {
  const started = performance.now();
  const useCache = io.cache.length > 0;
  const sequence = [...params.promptIds];
  const generated: number[] = [];
  let cache = useCache ? emptyCache(io) : {};
  let pastLength = 0;
  let firstTokenMs = 0;

  if (params.maxNewTokens <= 0) return { ids: [], stopReason: "length", firstTokenMs: 0 };
  for (;;) {
    const fed = useCache ? sequence.slice(pastLength) : sequence;
    const from = useCache ? pastLength : 0;
    const feeds: Record<string, TensorData> = { [io.inputIds]: sequenceTensor(fed), ...cache };
    if (io.attentionMask) feeds[io.attentionMask] = onesTensor(from + fed.length);
    if (io.positionIds) feeds[io.positionIds] = rangeTensor(from, from + fed.length);

    const outputs = await session.run(feeds);
    const logits = outputs[io.logits];
    if (!logits) throw new Error(`the graph returned no '${io.logits}' output`);
    const token = params.sampler(lastRow(logits));
    if (generated.length === 0) firstTokenMs = performance.now() - started;

    if (useCache) {
      pastLength = sequence.length;
      cache = {};
      for (const entry of io.cache) cache[entry.pastName] = outputs[entry.presentName]!;
    }
    const isEos = params.eosIds.has(token);
    if (!isEos) {
      generated.push(token);
      sequence.push(token);
    }
    const stop = shouldStop(token, generated.length, params);
    if (stop) return { ids: generated, stopReason: stop, firstTokenMs };
  }
}
