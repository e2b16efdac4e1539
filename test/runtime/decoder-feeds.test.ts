import { describe, expect, it } from "vitest";
import { float32Tensor, type TensorData } from "../../runtime/engine/session.js";
import {
  boundPresents,
  decoderFeeds,
  readDecoderOutputs,
} from "../../runtime/generation/decoder-feeds.js";
import type { DecoderIO } from "../../runtime/generation/decoder-io.js";

const IO: DecoderIO = {
  layout: "padded",
  shareBuffer: false,
  eosIds: [],
  inputIds: "input_ids",
  attentionMask: "attention_mask",
  positionIds: "position_ids",
  logits: "logits",
  cache: [
    { pastName: "past_key_values.0.key", presentName: "present.0.key" },
    { pastName: "past_key_values.0.value", presentName: "present.0.value" },
  ],
  kvHeads: 2,
  headDim: 3,
  vocabSize: 4,
};

function values(tensor: TensorData | undefined): { data: number[]; dims: readonly number[] } {
  if (!tensor) throw new Error("missing feed");
  return { data: Array.from(tensor.data, Number), dims: tensor.dims };
}

describe("decoder feeds", () => {
  it("a prefill feeds the prompt with a full mask, positions from 0 and empty past tensors", () => {
    const feeds = decoderFeeds(IO, { rows: [{ tokens: [7, 8, 9], filled: 0 }], past: null });
    expect(values(feeds.input_ids)).toEqual({ data: [7, 8, 9], dims: [1, 3] });
    expect(values(feeds.attention_mask)).toEqual({ data: [1, 1, 1], dims: [1, 3] });
    expect(values(feeds.position_ids)).toEqual({ data: [0, 1, 2], dims: [1, 3] });
    expect(feeds["past_key_values.0.key"]?.dims).toEqual([1, 2, 0, 3]);
    expect(feeds["past_key_values.0.value"]?.dims).toEqual([1, 2, 0, 3]);
  });

  it("a batched step masks each row's left padding and counts positions per row", () => {
    const length = 4;
    const tensor = new Float32Array(2 * 2 * length * 3);
    const feeds = decoderFeeds(IO, {
      rows: [
        { tokens: [5], filled: 2 },
        { tokens: [6], filled: 4 },
      ],
      past: {
        length,
        tensors: { "past_key_values.0.key": tensor, "past_key_values.0.value": tensor },
      },
    });
    expect(values(feeds.input_ids)).toEqual({ data: [5, 6], dims: [2, 1] });
    expect(values(feeds.attention_mask)).toEqual({
      data: [0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
      dims: [2, 5],
    });
    expect(values(feeds.position_ids)).toEqual({ data: [2, 4], dims: [2, 1] });
    expect(feeds["past_key_values.0.key"]).toEqual(float32Tensor(tensor, [2, 2, length, 3]));
  });

  it("a graph without a cache or position ids gets only what it declares", () => {
    const io: DecoderIO = { ...IO, cache: [], positionIds: null };
    const feeds = decoderFeeds(io, { rows: [{ tokens: [1, 2], filled: 0 }], past: null });
    expect(Object.keys(feeds).sort()).toEqual(["attention_mask", "input_ids"]);
  });

  it.each([
    [
      "rows feeding different numbers of tokens",
      {
        rows: [
          { tokens: [1], filled: 0 },
          { tokens: [1, 2], filled: 0 },
        ],
        past: null,
      },
      /as many tokens/,
    ],
    [
      "a row with more positions than the cache",
      { rows: [{ tokens: [1], filled: 3 }], past: null },
      /more positions/,
    ],
    [
      "a cache tensor of the wrong size",
      {
        rows: [{ tokens: [1], filled: 1 }],
        past: { length: 1, tensors: { "past_key_values.0.key": new Float32Array(5) } },
      },
      /holds 5 values, not 6/,
    ],
    ["a step without tokens", { rows: [], past: null }, /at least one token/],
  ])("refuses %s", (_name, step, message) => {
    expect(() => decoderFeeds(IO, step)).toThrow(message);
  });

  it("reads each row's last logits and the present cache under the past names", () => {
    // [batch 2, positions 2, vocab 4]
    const logits = Float32Array.from({ length: 16 }, (_, i) => i);
    const present = new Float32Array(6);
    const outputs = readDecoderOutputs(
      IO,
      {
        logits: float32Tensor(logits, [2, 2, 4]),
        "present.0.key": float32Tensor(present, [1, 2, 1, 3]),
        "present.0.value": float32Tensor(present, [1, 2, 1, 3]),
      },
      2,
    );
    expect(Array.from(outputs.lastLogits(0))).toEqual([4, 5, 6, 7]);
    expect(Array.from(outputs.lastLogits(1))).toEqual([12, 13, 14, 15]);
    expect(outputs.present["past_key_values.0.key"]).toBe(present);
    expect(() => readDecoderOutputs(IO, {}, 1)).toThrow(/no 'logits' output/);
  });

  describe("onnxruntime-genai's aligned layout", () => {
    const ALIGNED: DecoderIO = { ...IO, layout: "aligned", shareBuffer: true, positionIds: null };

    it("a growing cache: the mask spans past plus new, each row's ones from the start", () => {
      const past = {
        length: 3,
        tensors: {
          "past_key_values.0.key": new Float32Array(2 * 2 * 3 * 3),
          "past_key_values.0.value": new Float32Array(2 * 2 * 3 * 3),
        },
      };
      const feeds = decoderFeeds(ALIGNED, {
        rows: [
          { tokens: [5], filled: 3 },
          { tokens: [6], filled: 1 },
        ],
        past,
      });
      expect(values(feeds.attention_mask)).toEqual({
        data: [1, 1, 1, 1, 1, 1, 0, 0],
        dims: [2, 4],
      });
      expect(feeds.position_ids).toBeUndefined();
    });

    it("a shared buffer: the mask is as wide as the buffer, and presents bind to the pasts", () => {
      const key = new Float32Array(1 * 2 * 8 * 3);
      const value = new Float32Array(1 * 2 * 8 * 3);
      const feeds = decoderFeeds(ALIGNED, {
        rows: [{ tokens: [5], filled: 2 }],
        past: {
          length: 8,
          tensors: { "past_key_values.0.key": key, "past_key_values.0.value": value },
        },
      });
      expect(values(feeds.attention_mask)).toEqual({
        data: [1, 1, 1, 0, 0, 0, 0, 0],
        dims: [1, 8],
      });
      const bound = boundPresents(ALIGNED, feeds);
      expect(bound["present.0.key"]?.data).toBe(key);
      expect(bound["present.0.value"]?.data).toBe(value);
      expect(bound["present.0.key"]?.dims).toEqual([1, 2, 8, 3]);
    });
  });
});
