import { expect } from "vitest";
import type { DecoderOutputs, DecoderSession } from "../../../runtime/generation/decoder-feeds.js";
import type { DecoderIO } from "../../../runtime/generation/decoder-io.js";
import { prefill } from "../../../runtime/generation/prefill.js";
import { PrefixCache } from "../../../runtime/generation/prefix-cache.js";

/** The same bits, not merely close values. */
export function sameBits(a: Float32Array, b: Float32Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

function expectSameOutputs(io: DecoderIO, got: DecoderOutputs, want: DecoderOutputs): void {
  expect(sameBits(got.lastLogits(0), want.lastLogits(0)), "the last logits").toBe(true);
  for (const { pastName } of io.cache) {
    expect(sameBits(got.present[pastName]!, want.present[pastName]!), pastName).toBe(true);
  }
}

/**
 * Prefills `prompt` from nothing, and again over the whole chunks a prefix
 * cache kept from `earlier` (a prompt sharing its start: an earlier turn, or
 * the same system prompt), and expects the same bits in the first output
 * token's logits and in every position's keys and values. Returns the
 * positions the cache gave.
 */
export async function expectExactPrefill(
  session: DecoderSession,
  io: DecoderIO,
  chunk: number,
  earlier: readonly number[],
  prompt: readonly number[],
): Promise<number> {
  const cache = new PrefixCache(
    { names: io.cache.map((c) => c.pastName), kvHeads: io.kvHeads, headDim: io.headDim, chunk },
    2 ** 31,
  );
  cache.store(earlier, (await prefill(session, io, earlier, null, chunk)).outputs.present);
  const hit = cache.lookup(prompt);
  expect(hit, "the cache holds a whole chunk of the prompt").not.toBeNull();
  const plain = await prefill(session, io, prompt, null, chunk);
  const reused = await prefill(session, io, prompt, hit!.past, chunk);
  expectSameOutputs(io, reused.outputs, plain.outputs);
  return hit!.tokens;
}
