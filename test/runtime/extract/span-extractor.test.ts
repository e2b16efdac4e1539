import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelSession } from "../../../runtime/engine/session.js";
import type { ExtractedEntity } from "../../../runtime/extract/extractor.js";
import { SPAN_LABELS_MAX, type SpanExtractor } from "../../../runtime/extract/span-extractor.js";
import { openTinyGliner } from "./span-support.js";

// tiny-gliner scores a span for a label from tables (test/fixtures/gliner/vocab.ts):
// one planted word of strength 1 gives logit 3 (0.953), two give 9, "sam" 1.2 (0.769).
const STRONG = 1 / (1 + Math.exp(-3));
const WEAK = 1 / (1 + Math.exp(-1.2));
const TWO = 1 / (1 + Math.exp(-9));
const ALL = ["person", "location", "organization"];

let extractor: SpanExtractor;
let session: ModelSession;

beforeAll(async () => {
  ({ extractor, session } = await openTinyGliner());
});
afterAll(async () => {
  await session.release();
});

async function extract(text: string, labels: string[] | null, threshold = 0.5) {
  const [entities] = await extractor.runBatch([extractor.prepare(text, { labels, threshold })]);
  return entities!;
}

/** Entities as "label:text@start" with the text cut from the input by the offsets. */
const show = (text: string, entities: ExtractedEntity[]) =>
  entities.map((e) => `${e.label}:${text.slice(e.start, e.end)}@${e.start}`);

describe("span extraction on tiny-gliner", () => {
  it("finds the planted entities with exact character offsets", async () => {
    const text = "Yesterday  Alice Smith flew from Paris to Tokyo for Acme, with Bob.";
    const entities = await extract(text, ALL);
    expect(show(text, entities)).toEqual([
      "person:Alice Smith@11",
      "location:Paris@33",
      "location:Tokyo@42",
      "organization:Acme@52",
      "person:Bob@63",
    ]);
    expect(entities[0]!.score).toBeCloseTo(TWO, 5);
    expect(entities[1]!.score).toBeCloseTo(STRONG, 5);
  });

  it("keeps offsets exact in UTF-16 after accents, emoji and punctuation", async () => {
    const text = "Café 😀 «Carol» visited état-major in Berlin!";
    expect(show(text, await extract(text, ALL))).toEqual(["person:Carol@9", "location:Berlin@38"]);
  });

  it("does not find look-alikes of planted words, nor planted words under other labels", async () => {
    // A word is read by its first piece, as GLiNER pools words: these start with no planted piece.
    const text = "Alicia and Malice met Parris near Acne of Londo and Tokio";
    expect(await extract(text, ALL)).toEqual([]);
    expect(await extract("Alice lives in Paris", ["company"])).toEqual([]);
  });

  it("returns only the labels asked for, under the names asked", async () => {
    const text = "Alice works for Acme in London";
    expect(show(text, await extract(text, ["city"]))).toEqual(["city:London@24"]);
    expect(show(text, await extract(text, ["company", "person name"]))).toEqual([
      "person name:Alice@0",
      "company:Acme@16",
    ]);
  });

  it("drops what scores below the threshold and keeps what scores at or above it", async () => {
    const text = "Sam met Alice";
    const low = await extract(text, ["person"], 0.5);
    expect(show(text, low)).toEqual(["person:Sam@0", "person:Alice@8"]);
    expect(low[0]!.score).toBeCloseTo(WEAK, 5);
    // Between Sam's 0.769 and Alice's 0.953.
    expect(show(text, await extract(text, ["person"], 0.9))).toEqual(["person:Alice@8"]);
    expect(show(text, await extract(text, ["person"], low[1]!.score))).toEqual(["person:Alice@8"]);
    expect(await extract(text, ["person"], 0.96)).toEqual([]);
  });

  it("picks the best of overlapping spans (GLiNER's flat decoding)", async () => {
    const text = "Bob Jones and Carol";
    expect(show(text, await extract(text, ["person"]))).toEqual([
      "person:Bob Jones@0",
      "person:Carol@14",
    ]);
  });

  it("reads texts longer than max_len in overlapping windows, offsets exact and each entity once", async () => {
    // max_len is 24 words and windows overlap by 6: the second window starts at word 18.
    const filler = (n: number) => Array.from({ length: n }, () => "the").join(" ");
    // Words 23 and 24 straddle the first window's end; Paris at word 20 is in both windows.
    const text = `${filler(20)} Paris and ${filler(1)} Bob Jones ${filler(40)} Initech ${filler(30)} Alice`;
    const entities = await extract(text, ALL);
    expect(show(text, entities)).toEqual([
      `location:Paris@${text.indexOf("Paris")}`,
      `person:Bob Jones@${text.indexOf("Bob")}`,
      `organization:Initech@${text.indexOf("Initech")}`,
      `person:Alice@${text.indexOf("Alice")}`,
    ]);
    expect(entities[1]!.score).toBeCloseTo(TWO, 5);
    const prepared = extractor.prepare(text, { labels: ALL, threshold: 0.5 });
    expect(prepared.windows.length).toBeGreaterThan(4);
  });

  it("gives each request in a batch what it gets alone", async () => {
    const requests: Array<[string, string[], number]> = [
      ["Alice Smith flew to Paris", ALL, 0.5],
      [`${"the ".repeat(30)}Sam met Carol at Globex in Berlin`, ["person", "company"], 0.5],
      ["Sam and Tokyo", ["location"], 0.9],
      ["", ALL, 0.5],
      ["Bob", ["colour"], 0.5],
    ];
    const prepared = requests.map(([text, labels, threshold]) =>
      extractor.prepare(text, { labels, threshold }),
    );
    const together = await extractor.runBatch(prepared);
    const alone = await Promise.all(prepared.map(async (p) => (await extractor.runBatch([p]))[0]));
    expect(together).toEqual(alone);
    expect(together.map((e) => e.length)).toEqual([2, 3, 1, 0, 0]);
  });

  it("counts the text's and the labels' tokens once, however many windows", () => {
    const short = extractor.prepare("Alice", { labels: ["person"], threshold: 0.5 });
    expect(short.inputTokens).toBe(1 + 3); // "alice", then "<<ENT>> person <<SEP>>"
    const long = extractor.prepare("the ".repeat(100), { labels: ["person"], threshold: 0.5 });
    expect(long.inputTokens).toBe(100 + 3);
  });
});

describe("span extraction refuses what it cannot do, naming the field", () => {
  it("needs labels", () => {
    expect(() => extractor.prepare("Alice", { labels: null, threshold: 0.5 })).toThrow(
      expect.objectContaining({ statusCode: 400, param: "metadata.labels" }),
    );
    expect(() => extractor.prepare("Alice", { labels: [], threshold: 0.5 })).toThrow(
      expect.objectContaining({ statusCode: 400, param: "metadata.labels" }),
    );
  });

  it(`takes at most ${SPAN_LABELS_MAX} labels`, () => {
    const labels = Array.from({ length: SPAN_LABELS_MAX + 1 }, (_, i) => `type${i}`);
    expect(() => extractor.prepare("Alice", { labels, threshold: 0.5 })).toThrow(
      expect.objectContaining({ statusCode: 400, param: "metadata.labels" }),
    );
    expect(() =>
      extractor.prepare("Alice", { labels: labels.slice(1), threshold: 0.5 }),
    ).not.toThrow();
  });

  it("refuses a label holding a prompt marker, which would read as another label", () => {
    expect(() =>
      extractor.prepare("Alice", { labels: ["person <<ENT>> city"], threshold: 0.5 }),
    ).toThrow(expect.objectContaining({ statusCode: 400, param: "metadata.labels" }));
    expect(() => extractor.prepare("Alice", { labels: ["person<<SEP>>"], threshold: 0.5 })).toThrow(
      /prompt markers/,
    );
  });

  it("reads a marker typed in the text as plain characters", async () => {
    const text = "<<ENT>> Alice <<SEP>> Paris";
    expect(show(text, await extract(text, ["person", "city"]))).toEqual([
      "person:Alice@8",
      "city:Paris@22",
    ]);
  });

  it("refuses labels that leave the text no room", () => {
    const label = "person ".repeat(260).trim();
    expect(() =>
      extractor.prepare("Alice", { labels: [label, label + " x"], threshold: 0.5 }),
    ).toThrow(expect.objectContaining({ statusCode: 400, param: "metadata.labels" }));
  });

  it("answers 420 for a text over the model's maxTokens", async () => {
    const { extractor: limited, session: own } = await openTinyGliner({ maxTokens: 10 });
    try {
      expect(() =>
        limited.prepare("the ".repeat(11), { labels: ["person"], threshold: 0.5 }),
      ).toThrow(expect.objectContaining({ statusCode: 420, code: "context_length_exceeded" }));
      expect(() =>
        limited.prepare("the ".repeat(10), { labels: ["person"], threshold: 0.5 }),
      ).not.toThrow();
    } finally {
      await own.release();
    }
  });
});
