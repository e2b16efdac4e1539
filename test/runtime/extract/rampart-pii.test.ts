import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelSession } from "../../../runtime/engine/session.js";
import type { EntityExtractor, ExtractedEntity } from "../../../runtime/extract/extractor.js";
import type { PreparedTokens } from "../../../runtime/extract/token-classifier.js";
import { loadModel } from "../../../runtime/model/load-model.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { RAMPART_SENTENCES, type Expected } from "./rampart-sentences.js";

const rampart = requireSharedModel("rampart-pii", "onnx/model_q4.onnx");

function shown(text: string, entities: readonly ExtractedEntity[]): Expected[] {
  return entities.map((e) => [e.label, e.start, e.end, text.slice(e.start, e.end)]);
}

const ALL = { labels: null, threshold: 0.5 };

describe.skipIf(!rampart.available)("rampart-pii: token classification", () => {
  let extractor: EntityExtractor;
  let session: ModelSession;

  beforeAll(async () => {
    const model = await loadModel({ path: rampart.path, overflow: "truncate", threads: 1 });
    if (model.task !== "entity-extraction") throw new Error(`loaded as ${model.task}`);
    extractor = model.extractor;
    session = model.session;
  });
  afterAll(async () => {
    await session?.release();
  });

  it("is read as token classification with the model's 17 entity types", () => {
    expect(extractor.method).toBe("token-classification");
    expect(extractor.labels).toHaveLength(17);
    expect(extractor.labels).toContain("EMAIL");
    expect(extractor.labels).not.toContain("O");
  });

  it("finds the expected entities, labels and offsets in every sentence, in one batch", async () => {
    const batch = RAMPART_SENTENCES.map(({ text }) => extractor.prepare(text, ALL));
    const found = await extractor.runBatch(batch);
    RAMPART_SENTENCES.forEach(({ text, entities }, i) => {
      expect(shown(text, found[i]!), text).toEqual(entities);
      for (const entity of found[i]!) expect(entity.score).toBeGreaterThanOrEqual(0.5);
    });
  });

  it("gives each sentence the same entities alone as in a padded batch", async () => {
    const { text } = RAMPART_SENTENCES[3]!;
    const [alone] = await extractor.runBatch([extractor.prepare(text, ALL)]);
    const [batched] = await extractor
      .runBatch(RAMPART_SENTENCES.map((s) => extractor.prepare(s.text, ALL)).slice(0, 5))
      .then((all) => [all[3]!]);
    expect(batched!.map((e) => [e.label, e.start, e.end])).toEqual(
      alone!.map((e) => [e.label, e.start, e.end]),
    );
    alone!.forEach((e, i) => expect(batched![i]!.score).toBeCloseTo(e.score, 4));
  });

  it("drops what scores below the threshold", async () => {
    const text = RAMPART_SENTENCES[4]!.text;
    const [low] = await extractor.runBatch([
      extractor.prepare(text, { labels: null, threshold: 0 }),
    ]);
    const connor = low!.find((e) => e.label === "SURNAME")!;
    // Connor is the one entity of the sentence the model is unsure of.
    expect(connor.score).toBeGreaterThan(0.5);
    expect(connor.score).toBeLessThan(0.6);
    const [high] = await extractor.runBatch([
      extractor.prepare(text, { labels: null, threshold: 0.6 }),
    ]);
    expect(high!.map((e) => e.label)).toEqual(["GIVEN_NAME", "EMAIL", "PHONE"]);
  });

  it("returns only the labels asked for", async () => {
    const text = RAMPART_SENTENCES[3]!.text;
    const [found] = await extractor.runBatch([
      extractor.prepare(text, { labels: ["EMAIL", "PHONE"], threshold: 0.5 }),
    ]);
    expect(shown(text, found!)).toEqual([
      ["PHONE", 32, 46, "(415) 555-0132"],
      ["EMAIL", 50, 73, "emily.chen@hospital.org"],
    ]);
  });

  it("reads an input longer than 512 tokens in windows, with exact offsets across a boundary", async () => {
    const filler = "Nothing else happened that week. ";
    const head = "John Smith lives in Paris and his email is ";
    const email = "john@example.com";
    // Grow the text until the e-mail's tokens straddle the first window's owned end.
    let text = "";
    let prepared: PreparedTokens | null = null;
    for (let repeats = 40; repeats < 80; repeats++) {
      for (const pad of ["", "ok ", "ok ok ", "ok ok ok ", "ok ok ok ok "]) {
        const candidate = `${filler.repeat(repeats)}${pad}${head}${email} and he wrote. ${filler.repeat(10)}`;
        const p = extractor.prepare(candidate, ALL) as PreparedTokens;
        const at = candidate.indexOf(email);
        const first = p.spans.findIndex((s) => s.start === at);
        const last = p.spans.findIndex((s) => s.end === at + email.length);
        const boundary = p.windows[0]!.ownEnd;
        if (p.windows.length > 1 && first < boundary && last >= boundary) {
          text = candidate;
          prepared = p;
          break;
        }
      }
      if (prepared) break;
    }
    if (!prepared) throw new Error("no filler length puts the e-mail across a window boundary");
    // Three windows: add a phone number past the second window's start.
    const tail = `${filler.repeat(100)}Contact Sarah Connor at sarah.connor@skynet.io or 212-555-0147.`;
    const long = text + tail;
    const longPrepared = extractor.prepare(long, ALL) as PreparedTokens;
    expect(longPrepared.windows.length).toBeGreaterThanOrEqual(3);
    expect(longPrepared.inputTokens).toBeGreaterThan(1020);

    const [found] = await extractor.runBatch([longPrepared]);
    const at = (what: string, from = 0) => long.indexOf(what, from);
    const expected = (label: string, what: string): Expected => [
      label,
      at(what),
      at(what) + what.length,
      what,
    ];
    expect(shown(long, found!)).toEqual([
      expected("GIVEN_NAME", "John"),
      expected("SURNAME", "Smith"),
      expected("EMAIL", "john@example.com"),
      expected("GIVEN_NAME", "Sarah"),
      expected("SURNAME", "Connor"),
      expected("EMAIL", "sarah.connor@skynet.io"),
      expected("PHONE", "212-555-0147"),
    ]);
  });
});
