import { describe, expect, it } from "vitest";
import {
  argmax,
  sampleTopP,
  SamplingScratch,
  softmaxWithTemperature,
} from "../../runtime/generation/logits.js";
import { chooseSampler } from "../../runtime/generation/sampler.js";
import { eosIdsFrom, shouldStop } from "../../runtime/generation/stopping.js";
import { mulberry32 } from "../fixtures/prng.js";

const logits = Float32Array.from([1, 3, 2, 0.5]);

describe("logits and sampling", () => {
  it("argmax picks the largest logit", () => {
    expect(argmax(logits)).toBe(1);
  });

  it("softmax with temperature sums to one and sharpens as temperature falls", () => {
    const warm = softmaxWithTemperature(logits, 1);
    const cold = softmaxWithTemperature(logits, 0.1);
    expect(warm.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    expect(cold[1]!).toBeGreaterThan(warm[1]!);
    expect(cold[1]!).toBeGreaterThan(0.99);
  });

  it("top_p keeps only the nucleus", () => {
    const probs = Float32Array.from([0.5, 0.3, 0.15, 0.05]);
    // With top_p 0.5 only token 0 is in the nucleus, whatever the draw.
    for (const r of [0, 0.3, 0.99]) expect(sampleTopP(probs, 0.5, r)).toBe(0);
    // With top_p 0.8 tokens 0 and 1 share the draw in proportion 5:3.
    expect(sampleTopP(probs, 0.8, 0.1)).toBe(0);
    expect(sampleTopP(probs, 0.8, 0.9)).toBe(1);
    // top_p 0, which the OpenAI API accepts, keeps the most probable token alone.
    for (const r of [0, 0.5, 0.99]) expect(sampleTopP(probs, 0, r)).toBe(0);
    // Even when no probability reaches 1/V (a flat row after float32 rounding).
    expect(sampleTopP(Float32Array.from([0.2, 0.2, 0.2, 0.2]), 0, 0.5)).toBe(0);
  });

  it("samples in proportion to probability", () => {
    const random = mulberry32(7);
    const sampler = chooseSampler({ temperature: 1, topP: 1 }, random);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 20000; i++) counts[sampler(logits)]!++;
    const expected = softmaxWithTemperature(logits, 1);
    counts.forEach((count, i) => expect(count / 20000).toBeCloseTo(expected[i]!, 1));
  });

  it("temperature 0 is greedy and never draws", () => {
    const sampler = chooseSampler({ temperature: 0 }, () => {
      throw new Error("greedy decoding drew a random number");
    });
    expect(sampler(logits)).toBe(1);
  });
});

describe("stopping", () => {
  it("stops on end of sequence, on length and on abort", () => {
    const criteria = { maxNewTokens: 3, eosIds: new Set([9]) };
    expect(shouldStop(9, 1, criteria)).toBe("eos");
    expect(shouldStop(4, 3, criteria)).toBe("length");
    expect(shouldStop(4, 2, criteria)).toBeNull();
    const controller = new AbortController();
    controller.abort();
    expect(shouldStop(4, 1, { ...criteria, signal: controller.signal })).toBe("aborted");
  });

  it("reads eos ids from generation_config.json before config.json", () => {
    expect([...eosIdsFrom({ eos_token_id: [2, 5] }, { eos_token_id: 0 })]).toEqual([2, 5]);
    expect([...eosIdsFrom(null, { eos_token_id: 0 })]).toEqual([0]);
    expect([...eosIdsFrom(null, {})]).toEqual([]);
  });
});

describe("nucleus sampling without sorting the vocabulary", () => {
  /** The nucleus as the old implementation found it: a stable sort of every id. */
  function fullSortTopP(probs: Float32Array, topP: number, random: number): number {
    const order = Array.from(probs.keys()).sort((a, b) => probs[b]! - probs[a]!);
    let kept = 0;
    let mass = 0;
    while (kept < order.length && mass < topP) mass += probs[order[kept++]!]!;
    let target = random * mass;
    for (let i = 0; i < kept; i++) {
      target -= probs[order[i]!]!;
      if (target < 0) return order[i]!;
    }
    return order[kept - 1]!;
  }

  it("draws the same token as a full sort, flat or peaked, with ties", () => {
    const random = mulberry32(11);
    const scratch = new SamplingScratch();
    for (let trial = 0; trial < 300; trial++) {
      const size = 50 + Math.floor(random() * 2000);
      const logits = new Float32Array(size);
      const spread = trial % 3 === 0 ? 0.1 : trial % 3 === 1 ? 3 : 12;
      // Rounded logits make equal probabilities common.
      for (let i = 0; i < size; i++) logits[i] = Math.round(random() * spread * 4) / 4;
      const probs = softmaxWithTemperature(logits, 1, scratch.probabilities(size));
      for (const topP of [0.05, 0.5, 0.9, 0.999]) {
        const draw = random();
        expect(sampleTopP(probs, topP, draw, scratch)).toBe(fullSortTopP(probs, topP, draw));
      }
    }
  });
});
