import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireSharedModel } from "../../support/shared-models.js";
import { expectedSpans, PII_SENTENCES } from "./pii-sentences.js";
import {
  aggregateEntities,
  placePieces,
  ReferenceTokenClassifier,
  type ReferenceEntity,
} from "./token-classification-reference.js";

const MODEL_ID = "rampart-pii";
const ONNX_FILE = "onnx/model_q4.onnx";
const rampart = requireSharedModel(MODEL_ID, ONNX_FILE);

/** The runtime's default threshold: entities scoring below it are dropped. */
const DEFAULT_THRESHOLD = 0.5;

function withoutScores(entities: readonly ReferenceEntity[]) {
  return entities.map(({ label, start, end, text }) => ({ label, start, end, text }));
}

describe("the reference's aggregation (pure)", () => {
  it("places pieces by their own text, accents stripped, in UTF-16 offsets", () => {
    expect(placePieces("José  Ál-v", ["jose", "al", "-", "##v"])).toEqual([
      { start: 0, end: 4 },
      { start: 6, end: 8 },
      { start: 8, end: 9 },
      { start: 9, end: 10 },
    ]);
    // A character outside the BMP is two UTF-16 code units.
    expect(placePieces("🙂 ab", ["🙂", "ab"])).toEqual([
      { start: 0, end: 2 },
      { start: 3, end: 5 },
    ]);
    expect(() => placePieces("ab cd", ["ab", "ce"])).toThrow(/does not match/);
  });

  it("joins touching pieces of one type and I- continuations, and nothing across an O", () => {
    const text = "Li Wei at li.wei@x.org 74 2";
    const t = (label: string, score: number, start: number, end: number) => ({
      label,
      score,
      start,
      end,
    });
    const entities = aggregateEntities(text, [
      t("B-GIVEN_NAME", 0.9, 0, 2),
      t("I-GIVEN_NAME", 0.7, 3, 6), // I- continues across a space
      t("O", 0.99, 7, 9),
      t("B-EMAIL", 0.8, 10, 12),
      t("B-EMAIL", 0.6, 12, 13), // touching: the same word
      t("I-EMAIL", 0.7, 13, 16),
      t("O", 0.6, 16, 17), // an O piece inside the word ends the entity
      t("B-EMAIL", 0.5, 17, 22),
      t("B-BUILDING_NUMBER", 0.9, 23, 25),
      t("B-BUILDING_NUMBER", 0.9, 26, 27), // B- after a space: a new entity
    ]);
    expect(entities.map((e) => [e.label, e.text])).toEqual([
      ["GIVEN_NAME", "Li Wei"],
      ["EMAIL", "li.wei"],
      ["EMAIL", "x.org"],
      ["BUILDING_NUMBER", "74"],
      ["BUILDING_NUMBER", "2"],
    ]);
    expect(entities[0]!.score).toBeCloseTo(0.8, 10);
    expect(entities[1]!.score).toBeCloseTo(0.7, 10);
  });
});

describe.skipIf(!rampart.available)("rampart-pii: the transformers.js reference", () => {
  let reference: ReferenceTokenClassifier;

  beforeAll(async () => {
    reference = await ReferenceTokenClassifier.load(rampart.dir, MODEL_ID);
  });
  afterAll(async () => reference?.dispose());

  // The reference is only worth comparing against if it is right where a reader can tell.
  it.each(PII_SENTENCES.filter((s) => s.expected !== null).map((s) => [s.text, s] as const))(
    "finds what a reader finds in %j",
    async (_text, sentence) => {
      const entities = (await reference.entities(sentence.text)).filter(
        (e) => e.score >= DEFAULT_THRESHOLD,
      );
      expect(withoutScores(entities)).toEqual(expectedSpans(sentence));
    },
  );
});
