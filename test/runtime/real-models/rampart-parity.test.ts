import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelSession } from "../../../runtime/engine/session.js";
import type { EntityExtractor, ExtractedEntity } from "../../../runtime/extract/extractor.js";
import { loadModel } from "../../../runtime/model/load-model.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";
import { RAMPART_SENTENCES } from "../extract/rampart-sentences.js";
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

/**
 * Both sides run the same graph on the same onnxruntime build; only the
 * session options (threads, so the order of float sums) may differ. Scores
 * are means of softmax probabilities, so differences stay near 1e-6.
 */
const SCORE_TOLERANCE = 1e-5;

/**
 * Every sentence either set holds: ours here, and the runtime's own pinned
 * set (test/runtime/extract/rampart-sentences.ts), so that the reference
 * agrees with the runtime on every sentence the project checks by eye.
 */
const PARITY_TEXTS = [
  ...new Set([...PII_SENTENCES.map((s) => s.text), ...RAMPART_SENTENCES.map((s) => s.text)]),
];

const codePoints = (s: string) => Array.from(s).length;

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

describe.skipIf(!rampart.available)("rampart-pii: our runtime against transformers.js", () => {
  let reference: ReferenceTokenClassifier;
  let extractor: EntityExtractor;
  let session: ModelSession;
  /** The reference's entities per sentence, at threshold 0: everything it finds. */
  let expected: ReferenceEntity[][];

  beforeAll(async () => {
    reference = await ReferenceTokenClassifier.load(rampart.dir, MODEL_ID);
    expected = [];
    for (const text of PARITY_TEXTS) expected.push(await reference.entities(text));
    const model = await loadModel({
      path: rampart.path,
      onnxFile: ONNX_FILE,
      overflow: "truncate",
      threads: 2,
    });
    session = model.session;
    if (model.task !== "entity-extraction") {
      throw new Error(`${MODEL_ID} loaded as ${model.task}, not entity-extraction`);
    }
    extractor = model.extractor;
  });
  afterAll(async () => {
    await session?.release();
    await reference?.dispose();
  });

  function expectSame(text: string, ours: readonly ExtractedEntity[], theirs: ReferenceEntity[]) {
    expect(
      ours.map(({ label, start, end }) => ({ label, start, end, text: text.slice(start, end) })),
      text,
    ).toEqual(withoutScores(theirs));
    ours.forEach((entity, i) => {
      expect(Math.abs(entity.score - theirs[i]!.score), `${text}: ${entity.label}`).toBeLessThan(
        SCORE_TOLERANCE,
      );
    });
  }

  const all = { labels: null, threshold: 0 };

  it("finds the reference's entities, offsets and scores in each sentence alone", async () => {
    let largest = 0;
    for (const [i, text] of PARITY_TEXTS.entries()) {
      const [ours] = await extractor.runBatch([extractor.prepare(text, all)]);
      expectSame(text, ours!, expected[i]!);
      for (const [k, e] of ours!.entries()) {
        largest = Math.max(largest, Math.abs(e.score - expected[i]![k]!.score));
      }
    }
    console.log(`rampart-pii: largest score difference from transformers.js ${largest}`);
  });

  it("finds the same in one batch of all sentences: padding changes nothing", async () => {
    const batch = PARITY_TEXTS.map((text) => extractor.prepare(text, all));
    const ours = await extractor.runBatch(batch);
    expect(ours).toHaveLength(PARITY_TEXTS.length);
    PARITY_TEXTS.forEach((text, i) => expectSame(text, ours[i]!, expected[i]!));
  });

  it.each(PII_SENTENCES.filter((s) => s.expected !== null).map((s) => [s.text, s] as const))(
    "finds what a reader finds in %j at the default threshold",
    async (_text, sentence) => {
      const settings = { labels: null, threshold: DEFAULT_THRESHOLD };
      const [ours] = await extractor.runBatch([extractor.prepare(sentence.text, settings)]);
      expect(
        ours!.map(({ label, start, end }) => ({
          label,
          start,
          end,
          text: sentence.text.slice(start, end),
        })),
      ).toEqual(expectedSpans(sentence));
    },
  );

  describe("through the runtime's HTTP server", () => {
    let runtime: RunningRuntime;

    beforeAll(async () => {
      runtime = await startRuntime({
        path: rampart.path,
        onnxFile: ONNX_FILE,
        modelId: MODEL_ID,
        threads: 2,
      });
    });
    afterAll(async () => runtime?.close());

    it.each(PARITY_TEXTS.map((text, i) => [text, i] as const))(
      "answers %j with the reference's entities as annotations",
      async (text, i) => {
        const response = await runtime.post({ model: MODEL_ID, input: text });
        expect(response.status).toBe(200);
        const body = (await response.json()) as {
          output: Array<{ type: string; role?: string; content?: Array<Record<string, unknown>> }>;
        };
        const messages = body.output.filter((item) => item.type === "message");
        expect(messages).toHaveLength(1);
        expect(messages[0]!.role).toBe("assistant");
        const part = messages[0]!.content!.find((c) => c.type === "output_text")!;
        // Without a mask or a schema, the answer's text is the input.
        expect(part.text).toBe(text);
        const annotations = part.annotations as Array<Record<string, unknown>>;
        const theirs = expected[i]!.filter((e) => e.score >= DEFAULT_THRESHOLD);
        expect(annotations.map(({ score: _score, ...rest }) => rest)).toEqual(
          theirs.map((e) => ({
            type: "entity",
            label: e.label,
            // The answer counts code points (api/entity-answer.ts); the reference, UTF-16 units.
            start_index: codePoints(text.slice(0, e.start)),
            end_index: codePoints(text.slice(0, e.end)),
            text: e.text,
          })),
        );
        annotations.forEach((a, k) => {
          expect(Math.abs(Number(a.score) - theirs[k]!.score)).toBeLessThan(SCORE_TOLERANCE);
        });
      },
    );
  });
});
