import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseGenaiConfig } from "../../runtime/model/genai-config.js";
import { generateFixtures } from "../fixtures/generate.js";

describe("parseGenaiConfig", () => {
  it("reads names, cache shape and special ids from the builder's genai_config.json", async () => {
    const folder = (await generateFixtures())["tiny-genai"]!;
    const raw: unknown = JSON.parse(readFileSync(join(folder, "genai_config.json"), "utf8"));
    const decoder = parseGenaiConfig(raw, folder);
    expect(decoder).toMatchObject({
      filename: "model.onnx",
      inputIds: "input_ids",
      attentionMask: "attention_mask",
      positionIds: null,
      logits: "logits",
      kvHeads: 2,
      headDim: 16,
      contextLength: 512,
      eosIds: [0, 2],
      shareBuffer: true,
    });
    expect(decoder.cache.slice(0, 3)).toEqual([
      { pastName: "past_key_values.0.key", presentName: "present.0.key" },
      { pastName: "past_key_values.0.value", presentName: "present.0.value" },
      { pastName: "past_key_values.1.key", presentName: "present.1.key" },
    ]);
    expect(decoder.cache).toHaveLength(4);
  });

  it("names the field that is missing", () => {
    expect(() => parseGenaiConfig({ model: { context_length: 8 } }, "/m")).toThrow(
      /\/m\/genai_config.json: model.decoder/,
    );
  });
});
