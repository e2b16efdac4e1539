import {
  decoderFeeds,
  readDecoderOutputs,
  type DecoderOutputs,
  type DecoderSession,
  type PastCache,
} from "./decoder-feeds.js";
import type { DecoderIO } from "./decoder-io.js";
import { releaseBuffers } from "./release-outputs.js";

/**
 * Prefill in fixed, position-aligned chunks: chunk k feeds the prompt's tokens
 * [kB, (k+1)B) over the past [0, kB), whether that past was just computed or
 * came from the prefix cache. So a prompt's keys, values and last logits are
 * the same computation (same inputs, same shapes, same kernels) with and
 * without the cache, and greedy output is bit-identical: prefilling only the
 * tail of a prompt over a cached past would run other shapes and other sums
 * than one whole-prompt run, and on quantized models near-ties flip.
 *
 * The cost: a long prompt is several runs instead of one (a few ms each on
 * top of the same arithmetic), and the cache reuses whole chunks only.
 */
export const PREFILL_CHUNK_TOKENS = 64;

export interface Prefilled {
  /** The last chunk's outputs: the first output token's logits, and every prompt position's keys and values. */
  outputs: DecoderOutputs;
  /**
   * Frees `outputs` at once, for a caller that has copied what it keeps (the
   * batch cache and the prefix cache copy): their logits hold every prompt
   * position's (some MB on a real vocabulary), which would otherwise wait
   * for a mark-compact as external memory (release-outputs.ts).
   */
  release(): void;
}

/** Where chunk boundaries fall: the largest multiple of `chunk` at most `tokens`. */
export function alignDown(tokens: number, chunk: number): number {
  return Math.floor(tokens / chunk) * chunk;
}

/**
 * Feeds `prompt` to a graph with a KV cache, one sequence, starting after the
 * `past` positions (a multiple of `chunk`, from the prefix cache) or from
 * nothing.
 */
export async function prefill(
  session: DecoderSession,
  io: DecoderIO,
  prompt: readonly number[],
  past: PastCache | null,
  chunk: number,
): Promise<Prefilled> {
  if (!(chunk >= 1) || !Number.isInteger(chunk))
    throw new Error("the prefill chunk must be a positive integer");
  let filled = past?.length ?? 0;
  if (filled % chunk !== 0)
    throw new Error(`a cached past of ${filled} positions is not chunk-aligned`);
  if (filled >= prompt.length)
    throw new Error("the prefill needs at least one prompt token to feed");
  let cache = past;
  // The caller's past (the prefix cache's copy) is never freed here.
  const theirs = Object.values(past?.tensors ?? {});
  for (;;) {
    const end = Math.min(prompt.length, filled + chunk);
    const results = await session.run(
      decoderFeeds(io, { rows: [{ tokens: prompt.slice(filled, end), filled }], past: cache }),
    );
    // The chunk before's presents were this run's past: nothing reads them again.
    if (cache !== past) releaseBuffers(Object.values(cache?.tensors ?? {}), theirs);
    const outputs = readDecoderOutputs(io, results, 1);
    const all = Object.values(results).map((tensor) => tensor.data);
    if (end === prompt.length) return { outputs, release: () => releaseBuffers(all, theirs) };
    // A chunk's logits before the last are never read.
    releaseBuffers(all, [...theirs, ...Object.values(outputs.present)]);
    cache = { length: end, tensors: outputs.present };
    filled = end;
  }
}
