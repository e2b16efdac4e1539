import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema, type ResponsesResponse } from "../../api/responses-response.js";
import { streamedResponseSchema } from "../../api/stream-events.js";
import { commonPrefix, PrefixCache } from "../../runtime/generation/prefix-cache.js";
import { parseEventStream } from "../support/sse-events.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * The runtime's prefix cache: the bookkeeping on its own, then real fixture
 * models (float32, so greedy ids are exact) served twice, with the cache and
 * without, answering the same conversations: the answers must be the same
 * ids, and only the cached runtime reports cached tokens.
 */
const GEOMETRY = { names: ["k", "v"], kvHeads: 2, headDim: 3 };
const PER_TOKEN = 2 * 2 * 3 * 4;

/** Keys and values whose every value says which token and which head it belongs to. */
function kvOf(tokens: readonly number[]): Record<string, Float32Array> {
  const { kvHeads, headDim } = GEOMETRY;
  const tensor = (salt: number) => {
    const data = new Float32Array(kvHeads * tokens.length * headDim);
    for (let h = 0; h < kvHeads; h++) {
      tokens.forEach((token, p) => {
        for (let d = 0; d < headDim; d++) {
          data[(h * tokens.length + p) * headDim + d] = salt + token * 100 + h * 10 + d;
        }
      });
    }
    return data;
  };
  return { k: tensor(0), v: tensor(0.5) };
}

describe("PrefixCache (bookkeeping)", () => {
  it("finds the longest stored prefix, leaves the last prompt token to prefill, and slices its positions", () => {
    const cache = new PrefixCache(GEOMETRY, 1 << 20);
    cache.store([1, 2, 3, 4, 5], kvOf([1, 2, 3, 4, 5]));
    cache.store([1, 2, 9], kvOf([1, 2, 9]));
    expect(cache.lookup([7, 8])).toBeNull();

    const hit = cache.lookup([1, 2, 3, 4, 6, 7])!;
    expect(hit.tokens).toBe(4);
    expect(hit.past.length).toBe(4);
    expect(hit.past.tensors.k).toEqual(kvOf([1, 2, 3, 4]).k);
    expect(hit.past.tensors.v).toEqual(kvOf([1, 2, 3, 4]).v);

    // The whole stored sequence as the prompt: its last token is fed again.
    expect(cache.lookup([1, 2, 3, 4, 5])!.tokens).toBe(4);
    expect(cache.lookup([1, 2, 9, 1])!.past.tensors.k).toEqual(kvOf([1, 2, 9]).k);
    expect(cache.lookup([1])).toBeNull();
  });

  it("keeps within its byte budget, least recently used out first", () => {
    const cache = new PrefixCache(GEOMETRY, 10 * PER_TOKEN);
    cache.store([1, 1, 1, 1], kvOf([1, 1, 1, 1]));
    cache.store([2, 2, 2, 2], kvOf([2, 2, 2, 2]));
    expect(cache.bytes).toBe(8 * PER_TOKEN);
    cache.lookup([1, 1, 5]); // the first is now the more recently used
    cache.store([3, 3, 3, 3], kvOf([3, 3, 3, 3]));
    expect(cache.bytes).toBe(8 * PER_TOKEN);
    expect(cache.lookup([2, 2, 5])).toBeNull();
    expect(cache.lookup([1, 1, 5])?.tokens).toBe(2);
    expect(cache.lookup([3, 3, 5])?.tokens).toBe(2);
    // Larger than the whole budget: not kept, nothing evicted for it.
    cache.store(new Array<number>(11).fill(4), kvOf(new Array<number>(11).fill(4)));
    expect(cache.size).toBe(2);
  });

  it("replaces a sequence by one that extends it, and keeps nothing with a budget of zero", () => {
    const bytes: number[] = [];
    const cache = new PrefixCache(GEOMETRY, 1 << 20, (b) => bytes.push(b));
    cache.store([1, 2], kvOf([1, 2]));
    cache.store([1, 2, 3], kvOf([1, 2, 3]));
    expect(cache.size).toBe(1);
    cache.store([1, 2], kvOf([1, 2]));
    expect(cache.size).toBe(1);
    expect(cache.bytes).toBe(3 * PER_TOKEN);
    expect(bytes).toEqual([2 * PER_TOKEN, 3 * PER_TOKEN]);
    expect(() => cache.store([5, 6], kvOf([5]))).toThrow(/values/);

    const off = new PrefixCache(GEOMETRY, 0);
    off.store([1, 2], kvOf([1, 2]));
    expect(off.enabled).toBe(false);
    expect(off.lookup([1, 2, 3])).toBeNull();
    expect(commonPrefix([1, 2, 3], [1, 2, 4])).toBe(2);
  });

  it("keeps and reuses whole chunks only", () => {
    const cache = new PrefixCache({ ...GEOMETRY, chunk: 4 }, 1 << 20);
    const ten = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    cache.store(ten, kvOf(ten));
    expect(cache.bytes).toBe(8 * PER_TOKEN);
    expect(cache.lookup([...ten, 11])!.tokens).toBe(8);
    expect(cache.lookup([...ten, 11])!.past.tensors.k).toEqual(kvOf(ten.slice(0, 8)).k);
    // Eight shared, but the last prompt token is fed: one chunk.
    expect(cache.lookup(ten.slice(0, 8))!.tokens).toBe(4);
    expect(cache.lookup([1, 2, 3, 4, 5, 6, 7, 99, 99])!.tokens).toBe(4);
    expect(cache.lookup([1, 2, 3, 99, 99])).toBeNull();
    // Shorter than a chunk: nothing to keep.
    cache.store([7, 7, 7], kvOf([7, 7, 7]));
    expect(cache.size).toBe(1);
    expect(() => new PrefixCache({ ...GEOMETRY, chunk: 0 }, 1)).toThrow(/chunk/);
  });
});

type Message = { role: "user" | "assistant" | "system"; content: string };

/** Small chunks, so that the fixtures' short conversations span several. */
const CHUNK = 4;

const CONVERSATIONS: readonly (readonly string[])[] = [
  ["Tell me about ships", "And harbours?", "What about the open sea at night?"],
  ["Hi", "How are you today?", "Say that again"],
  ["The quick brown fox", "jumps over the lazy dog", "and then?"],
];

for (const fixture of ["tiny-gpt", "tiny-genai"] as const) {
  describe(`the prefix cache on ${fixture} (float32)`, () => {
    let cached: RunningRuntime;
    let plain: RunningRuntime;

    beforeAll(async () => {
      const path = await fixtureFolder(fixture);
      cached = await startRuntime(
        { path, modelId: fixture },
        { generationConcurrency: 4, prefixCacheBytes: 1 << 24, prefillChunkTokens: CHUNK },
      );
      plain = await startRuntime(
        { path, modelId: fixture },
        { generationConcurrency: 4, prefixCacheBytes: 0, prefillChunkTokens: CHUNK },
      );
    });
    afterAll(async () => Promise.all([cached?.close(), plain?.close()]));

    async function ask(
      runtime: RunningRuntime,
      input: Message[],
      extra: Record<string, unknown> = {},
    ): Promise<ResponsesResponse> {
      const response = await runtime.post({
        model: fixture,
        input,
        temperature: 0,
        max_output_tokens: 12,
        ...extra,
      });
      expect(response.status).toBe(200);
      return responsesResponseSchema.parse(await response.json());
    }

    /** Plays a conversation turn by turn, each turn carrying the earlier ones and their answers. */
    async function converse(runtime: RunningRuntime, turns: readonly string[]) {
      const history: Message[] = [];
      const answers: ResponsesResponse[] = [];
      for (const turn of turns) {
        history.push({ role: "user", content: turn });
        const answer = await ask(runtime, history);
        answers.push(answer);
        history.push({ role: "assistant", content: answer.output[0]!.content[0]!.text });
      }
      return answers;
    }

    it("answers concurrent conversations with the same greedy ids, reusing each earlier turn", async () => {
      const hitsBefore = (await cached.metrics.prefixCacheHits.get()).values[0]?.value ?? 0;
      const [withCache, without] = await Promise.all([
        Promise.all(CONVERSATIONS.map((turns) => converse(cached, turns))),
        Promise.all(CONVERSATIONS.map((turns) => converse(plain, turns))),
      ]);
      let reused = 0;
      CONVERSATIONS.forEach((turns, c) => {
        turns.forEach((turn, t) => {
          const a = withCache[c]![t]!;
          const b = without[c]![t]!;
          expect(a.output[0]!.content[0]!.text, turn).toBe(b.output[0]!.content[0]!.text);
          expect(a.usage!.input_tokens).toBe(b.usage!.input_tokens);
          expect(a.usage!.output_tokens).toBe(b.usage!.output_tokens);
          expect(b.usage!.input_tokens_details.cached_tokens).toBe(0);
          const got = a.usage!.input_tokens_details.cached_tokens;
          expect(got).toBeLessThan(a.usage!.input_tokens);
          expect(got % CHUNK).toBe(0);
          if (t > 0) {
            // At least the whole chunks of the previous prompt came from the cache.
            const previous = withCache[c]![t - 1]!.usage!.input_tokens;
            expect(got, turn).toBeGreaterThanOrEqual(previous - (previous % CHUNK));
            reused += got;
          }
        });
      });
      const hits = (await cached.metrics.prefixCacheHits.get()).values[0]?.value ?? 0;
      expect(hits - hitsBefore).toBeGreaterThanOrEqual(CONVERSATIONS.length * 2);
      const tokens = (await cached.metrics.prefixCachedTokens.get()).values[0]?.value ?? 0;
      expect(tokens).toBeGreaterThanOrEqual(reused);
      const held = (await cached.metrics.prefixCacheBytes.get()).values[0]?.value ?? 0;
      expect(held).toBeGreaterThan(0);
      expect(held).toBeLessThanOrEqual(1 << 24);
    });

    it("reuses a shared system prompt across users, and streams the same answer with the same usage", async () => {
      const system = "You are a careful assistant who answers about the sea, ships and harbours.";
      const first = await ask(cached, [
        { role: "system", content: system },
        { role: "user", content: "Ships?" },
      ]);
      const input: Message[] = [
        { role: "system", content: system },
        { role: "user", content: "What is a harbour, and why do ships need one?" },
      ];
      const reference = await ask(plain, input);
      const response = await cached.post({
        model: fixture,
        input,
        temperature: 0,
        max_output_tokens: 12,
        stream: true,
      });
      const events = parseEventStream(await response.text());
      const final = streamedResponseSchema.parse(events.at(-1)!.data.response);
      expect(final.output[0]!.content[0]!.text).toBe(reference.output[0]!.content[0]!.text);
      expect(final.usage!.input_tokens).toBe(reference.usage!.input_tokens);
      const got = final.usage!.input_tokens_details.cached_tokens;
      // The system turn's whole chunks, not the first question.
      expect(got % CHUNK).toBe(0);
      expect(got).toBeGreaterThanOrEqual(system.split(" ").length - CHUNK);
      expect(got).toBeLessThan(first.usage!.input_tokens);
    });
  });
}
