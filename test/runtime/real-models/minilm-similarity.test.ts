import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimilarityClassifier } from "../../../runtime/classify/similarity-classifier.js";
import type { ModelSession } from "../../../runtime/engine/session.js";
import { TextTokenizer } from "../../../runtime/engine/tokenizer.js";
import { loadModel } from "../../../runtime/model/load-model.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";
import { ReferenceEmbedder } from "./transformers-reference.js";

const MODEL_ID = "all-minilm-l6-v2";
const minilm = requireSharedModel(MODEL_ID);

/** Float32 sums in a different order than the reference's: well under int8 noise. */
const TOLERANCE = 1e-4;

/** From two words to a long paragraph, so one batch holds rows of very different padding. */
const SENTENCES = [
  "Hello world",
  "The cat sat on the mat.",
  "Stock markets fell sharply on Tuesday after the central bank raised interest rates.",
  "How do I reset my password if I no longer have access to my email?",
  "A quiet village in the mountains, where the snow stays until late spring and the nights are cold.",
  "Photosynthesis converts light energy into chemical energy stored in glucose, releasing oxygen as a by-product.",
  "The new library opens on Monday. It has a reading room, a children's corner, a cafe and more than forty thousand books, and it stays open until ten in the evening on weekdays so that students and workers can use it after their classes and shifts.",
  "ok",
];

const LABELS = ["sports", "politics", "cooking"];
const CLEAR_EXAMPLES: Array<[string, string]> = [
  ["The striker scored twice in the second half and the team won the cup final.", "sports"],
  ["She ran the marathon in under three hours and beat her personal best.", "sports"],
  ["The tennis player served an ace to win the championship match.", "sports"],
  ["Parliament passed the budget after a long debate between the two main parties.", "politics"],
  ["The president signed the new law and the opposition called for an election.", "politics"],
  ["Voters will choose a new prime minister in the general election next month.", "politics"],
  [
    "Chop the onions, fry them in butter, then add the tomatoes and simmer for twenty minutes.",
    "cooking",
  ],
  ["Whisk the eggs with sugar, fold in the flour and bake the cake for forty minutes.", "cooking"],
  ["Season the chicken with salt and pepper and roast it in a hot oven.", "cooking"],
];

function maxDifference(ours: Float32Array, reference: number[]): number {
  expect(ours.length).toBe(reference.length);
  let max = 0;
  for (let i = 0; i < ours.length; i++) max = Math.max(max, Math.abs(ours[i]! - reference[i]!));
  return max;
}

async function readJson(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
}

describe.skipIf(!minilm.available)(
  "all-MiniLM-L6-v2: our embeddings against transformers.js",
  () => {
    let reference: ReferenceEmbedder;
    let classifier: SimilarityClassifier;
    let session: ModelSession;
    let tokenizer: TextTokenizer;
    let expected: number[][];

    beforeAll(async () => {
      reference = await ReferenceEmbedder.load(minilm.dir, MODEL_ID);
      const model = await loadModel({ path: minilm.path, overflow: "truncate", threads: 2 });
      session = model.session;
      if (model.task !== "zero-shot-classification" || model.classifier.method !== "similarity") {
        throw new Error(`${MODEL_ID} did not load as a similarity classifier`);
      }
      // The folder is a sentence-transformers model, so the classifier is the similarity one.
      classifier = model.classifier as unknown as SimilarityClassifier;
      tokenizer = new TextTokenizer(
        await readJson(join(minilm.path, "tokenizer.json")),
        await readJson(join(minilm.path, "tokenizer_config.json")),
      );
      expected = [];
      for (const sentence of SENTENCES) expected.push(await reference.embed(sentence));
    });
    afterAll(async () => {
      await session?.release();
      await reference?.dispose();
    });

    it("tokenizes like the reference", () => {
      for (const sentence of SENTENCES) {
        expect(tokenizer.encode(sentence).ids).toEqual(reference.encode(sentence));
      }
    });

    it("embeds one batch of varied lengths like the reference: padding changes nothing", async () => {
      const ours = await classifier.embed(SENTENCES.map((s) => tokenizer.encode(s)));
      expect(ours).toHaveLength(SENTENCES.length);
      const differences = ours.map((row, i) => maxDifference(row, expected[i]!));
      console.log(`MiniLM batched: largest difference per sentence ${differences.join(", ")}`);
      differences.forEach((difference, i) => {
        expect(difference, SENTENCES[i]).toBeLessThan(TOLERANCE);
      });
    });

    it("embeds each sentence alone like the reference", async () => {
      for (const [i, sentence] of SENTENCES.entries()) {
        const [row] = await classifier.embed([tokenizer.encode(sentence)]);
        expect(maxDifference(row!, expected[i]!), sentence).toBeLessThan(TOLERANCE);
      }
    });

    describe("zero-shot classification through the HTTP server", () => {
      let runtime: RunningRuntime;

      beforeAll(async () => {
        runtime = await startRuntime({ path: minilm.path, modelId: MODEL_ID, threads: 2 });
      });
      afterAll(async () => runtime?.close());

      it.each(CLEAR_EXAMPLES)("scores %j highest as %s", async (input, right) => {
        const response = await runtime.post({ model: MODEL_ID, input, categories: LABELS });
        expect(response.status).toBe(200);
        const body = (await response.json()) as Record<string, unknown>;
        // Printed so that the calibration of the scores can be reviewed by eye.
        console.log(`${right.padEnd(8)} ${JSON.stringify(body)}  ${input}`);
        expect(Object.keys(body).sort()).toEqual([...LABELS].sort());
        const scores = body as Record<string, number>;
        for (const label of LABELS) {
          expect(typeof scores[label]).toBe("number");
          expect(scores[label]).toBeGreaterThanOrEqual(0);
          expect(scores[label]).toBeLessThanOrEqual(1);
          if (label !== right) expect(scores[right]).toBeGreaterThan(scores[label]!);
        }
      });
    });
  },
);
