import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PaddedBatchCache, SharedBatchCache } from "../../runtime/generation/batch-cache.js";
import { boundPresents, decoderFeeds } from "../../runtime/generation/decoder-feeds.js";
import type { DecoderIO } from "../../runtime/generation/decoder-io.js";
import { prefill } from "../../runtime/generation/prefill.js";
import { PrefixCache } from "../../runtime/generation/prefix-cache.js";
import { releaseOutputs } from "../../runtime/generation/release-outputs.js";
import { SharedKvCache } from "../../runtime/generation/shared-kv-cache.js";
import type { ModelSession, TensorData } from "../../runtime/engine/session.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * Releasing a decode step's outputs at once (runtime/generation/release-outputs.ts),
 * so that their memory does not wait for V8's next mark-compact.
 */
const tensor = (data: Float32Array): TensorData => ({ type: "float32", data, dims: [data.length] });

describe("releaseOutputs", () => {
  it("frees the outputs' buffers and never the caller's own, a shared buffer once", () => {
    const mine = new Float32Array(8).fill(1);
    const fresh = new Float32Array(16).fill(2);
    const sharedBuffer = new ArrayBuffer(64);
    const left = new Float32Array(sharedBuffer, 0, 8);
    const right = new Float32Array(sharedBuffer, 32, 8);
    releaseOutputs(
      { a: tensor(mine), b: tensor(fresh), c: tensor(left), d: tensor(right) },
      { past: tensor(mine) },
    );
    expect(fresh.buffer.byteLength).toBe(0);
    expect(fresh.length).toBe(0);
    expect(sharedBuffer.byteLength).toBe(0);
    expect(mine.length).toBe(8);
    expect([...mine]).toEqual(Array(8).fill(1));
  });
});

describe("a decode step with bound presents on tiny-genai (the shared-buffer layout)", () => {
  let runtime: RunningRuntime;
  let session: ModelSession;
  let io: DecoderIO;

  beforeAll(async () => {
    runtime = await startRuntime({
      path: await fixtureFolder("tiny-genai"),
      modelId: "tiny-genai",
    });
    const lane = runtime.service.lane;
    if (lane.task !== "text-generation") throw new Error("not a generator");
    ({ session, io } = lane.generator);
  });
  afterAll(async () => runtime?.close());

  it("gets its presents back as copies, which go, while the cache's buffers keep the new position", async () => {
    expect(io.shareBuffer).toBe(true);
    const prompt = [5, 9, 14, 22, 7, 11];
    const { outputs } = await prefill(session, io, prompt, null, 4);
    const cache = new SharedBatchCache(io, {
      maxRows: 1,
      maxSequenceTokens: 64,
      maxTotalTokens: 64,
    });
    cache.add(prompt.length, outputs.present);
    const feeds = decoderFeeds(io, {
      rows: [{ tokens: [3], filled: prompt.length }],
      past: cache.past(),
    });
    const bound = boundPresents(io, feeds);
    const results = await session.run(feeds, [io.logits], bound);
    const name = io.cache[0]!;
    const past = feeds[name.pastName]!.data as Float32Array;
    const copy = results[name.presentName]!.data as Float32Array;
    // onnxruntime-node hands back a copy of the bound buffer: what the release is for.
    expect(copy.buffer).not.toBe(past.buffer);
    expect([...copy]).toEqual([...past]);
    const before = [...past];
    releaseOutputs(results, feeds);
    expect(copy.length).toBe(0);
    expect(results[io.logits]!.data.length).toBe(0);
    expect([...past]).toEqual(before);
    expect(before.some((v) => v !== 0)).toBe(true);
  });

  it("frees a prefill's outputs on release, and a prefix-cached past given to it never", async () => {
    const prompt = [5, 9, 14, 22, 7, 11, 30, 8, 12, 6];
    const cached = new PrefixCache(
      {
        names: io.cache.map((c) => c.pastName),
        kvHeads: io.kvHeads,
        headDim: io.headDim,
        chunk: 4,
      },
      1 << 20,
    );
    const first = await prefill(session, io, prompt, null, 4);
    cached.store(prompt, first.outputs.present);
    const view = first.outputs.lastLogits(0);
    const reference = [...view];
    first.release();
    const name = io.cache[0]!.pastName;
    expect(first.outputs.present[name]!.length).toBe(0);
    expect(view.length).toBe(0);

    // The prefix cache's copy outlives the release, and a prefill over it frees none of it.
    const hit = cached.lookup(prompt)!;
    expect(hit.tokens).toBe(8);
    const past = hit.past.tensors[name]!;
    const held = [...past];
    const again = await prefill(session, io, prompt, hit.past, 4);
    const logits = [...again.outputs.lastLogits(0)];
    again.release();
    expect([...past]).toEqual(held);
    expect(held.length).toBeGreaterThan(0);
    const worst = logits.reduce((m, v, i) => Math.max(m, Math.abs(v - reference[i]!)), 0);
    expect(worst).toBe(0);
  });
});

describe("the shared KV cache growing", () => {
  it("frees the buffers it outgrew, keeping every row's positions", () => {
    const names = ["past.0.key"];
    const c = new SharedKvCache(
      { names, kvHeads: 1, headDim: 2 },
      { maxRows: 4, chunk: 4, maxSequenceTokens: 64, maxTotalTokens: 256 },
    );
    c.add(3, () => Float32Array.from([1, 2, 3, 4, 5, 6]));
    const small = c.view(names[0]!);
    expect(c.capacity).toBe(4);
    c.advance();
    c.reserveStep();
    expect(c.capacity).toBe(8);
    expect(small.buffer.byteLength).toBe(0);
    expect([...c.copyRow(0, names[0]!)].slice(0, 6)).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe("the padded batch cache (Optimum exports)", () => {
  it("frees each tensor it replaces (a rebuilt one, a fed past), never the current one or a caller's", () => {
    const io = {
      kvHeads: 1,
      headDim: 2,
      cache: [{ pastName: "past.0.key", presentName: "present.0.key" }],
    } as unknown as DecoderIO;
    const cache = new PaddedBatchCache(io, {
      maxRows: 4,
      maxSequenceTokens: 64,
      maxTotalTokens: 256,
    });
    const tensorOf = () => cache.past().tensors["past.0.key"]!;
    const prefilled = Float32Array.from([1, 2, 3, 4]);
    cache.add(2, { "past.0.key": prefilled });
    const alone = tensorOf();
    cache.add(1, { "past.0.key": Float32Array.from([5, 6]) });
    // Admitting a row rebuilds the tensor: the one it replaced goes, the prefill's stays its owner's.
    expect(alone.length).toBe(0);
    expect([...prefilled]).toEqual([1, 2, 3, 4]);
    const fed = tensorOf();
    expect([...fed]).toEqual([1, 2, 3, 4, 0, 0, 5, 6]);

    // A step's presents become the past; the past they were computed from goes.
    const present = new Float32Array(12).fill(7);
    cache.advance({ "past.0.key": present });
    expect(fed.length).toBe(0);
    expect(tensorOf()).toBe(present);
    expect(present.length).toBe(12);

    // A row leaving rebuilds again, from the presents, which then go.
    cache.remove([0]);
    expect(present.length).toBe(0);
    expect([...tensorOf()]).toEqual([7, 7, 7, 7]);
  });
});
