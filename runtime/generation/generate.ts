import {
  decoderFeeds,
  readDecoderOutputs,
  type DecoderOutputs,
  type DecoderSession,
  type PastCache,
} from "./decoder-feeds.js";
import type { DecoderIO } from "./decoder-io.js";
import { prefill, PREFILL_CHUNK_TOKENS } from "./prefill.js";
import type { Sampler } from "./sampler.js";
import { shouldStop, type StopReason, type StoppingCriteria } from "./stopping.js";

/**
 * The step loop of one sequence. With a KV cache the prompt is fed once and
 * each later step feeds one token plus the cache the previous step returned;
 * without one, the whole sequence is fed every step.
 */
/** One sequence to decode, whichever loop decodes it. */
export interface DecodeJob {
  promptIds: readonly number[];
  maxNewTokens: number;
  sampler: Sampler;
  /**
   * Called with each output token as it is sampled, end-of-sequence
   * excluded: what streaming reads. Runs inside the decode loop, so it must
   * be quick and must not throw.
   */
  onToken?: ((id: number) => void) | undefined;
}

export interface GenerateParams extends DecodeJob, StoppingCriteria {
  /** Prompt tokens per prefill run with a KV cache (prefill.ts). */
  prefillChunkTokens?: number | undefined;
}

export interface Generated {
  ids: number[];
  stopReason: StopReason;
  /** Milliseconds until the first token was sampled. */
  firstTokenMs: number;
  /** Prompt tokens whose positions came from the prefix cache, not a prefill. */
  cachedTokens: number;
}

export async function generate(
  session: DecoderSession,
  io: DecoderIO,
  params: GenerateParams,
): Promise<Generated> {
  const started = performance.now();
  const useCache = io.cache.length > 0;
  const sequence = [...params.promptIds];
  const generated: number[] = [];
  let past: PastCache | null = null;
  let firstTokenMs = 0;

  if (params.maxNewTokens <= 0)
    return { ids: [], stopReason: "length", firstTokenMs: 0, cachedTokens: 0 };
  for (;;) {
    const filled = past?.length ?? 0;
    const row = { tokens: sequence.slice(filled), filled };
    // With a cache the prompt goes in position-aligned chunks, as in the decode scheduler.
    const outputs: DecoderOutputs =
      useCache && past === null
        ? (
            await prefill(
              session,
              io,
              sequence,
              null,
              params.prefillChunkTokens ?? PREFILL_CHUNK_TOKENS,
            )
          ).outputs
        : readDecoderOutputs(io, await session.run(decoderFeeds(io, { rows: [row], past })), 1);
    const token = params.sampler(outputs.lastLogits(0));
    if (generated.length === 0) firstTokenMs = performance.now() - started;
    if (useCache) past = { length: sequence.length, tensors: outputs.present };

    const isEos = params.eosIds.has(token);
    if (!isEos) {
      generated.push(token);
      sequence.push(token);
      params.onToken?.(token);
    }
    const stop = shouldStop(token, generated.length, params);
    if (stop) return { ids: generated, stopReason: stop, firstTokenMs, cachedTokens: 0 };
  }
}
