import { describe, expect, it } from "vitest";
import { rowCandidates, selectFlat } from "../../../runtime/extract/span-decode.js";

describe("GLiNER's flat decoding", () => {
  it("takes the best span first and drops every span that overlaps it", () => {
    const chosen = selectFlat([
      { start: 0, end: 1, label: 0, score: 0.9 },
      { start: 1, end: 2, label: 1, score: 0.95 },
      { start: 3, end: 3, label: 0, score: 0.6 },
      { start: 3, end: 3, label: 1, score: 0.7 }, // the same words under another label
      { start: 0, end: 0, label: 0, score: 0.8 },
    ]);
    expect(chosen).toEqual([
      { start: 0, end: 0, label: 0, score: 0.8 },
      { start: 1, end: 2, label: 1, score: 0.95 },
      { start: 3, end: 3, label: 1, score: 0.7 },
    ]);
  });

  it("keeps a span two windows both scored once, at its better score", () => {
    const chosen = selectFlat([
      { start: 5, end: 6, label: 0, score: 0.7 },
      { start: 5, end: 6, label: 0, score: 0.9 },
    ]);
    expect(chosen).toEqual([{ start: 5, end: 6, label: 0, score: 0.9 }]);
  });

  it("reads a row's logits as [words, max_width, labels], within its own words and labels", () => {
    // 1 row padded to 3 words, max_width 2, 2 label columns; the row has 2 words and 1 label.
    const data = new Float32Array(3 * 2 * 2).fill(-10);
    data[(0 * 2 + 1) * 2 + 0] = 10; // words 0..1, label 0
    data[(1 * 2 + 0) * 2 + 1] = 10; // word 1, label 1: a padded column
    data[(2 * 2 + 0) * 2 + 0] = 10; // word 2: past the row's words
    const found = rowCandidates({ data, words: 3, maxWidth: 2, labels: 2 }, 0, 2, 1, 0.5, 7);
    expect(found).toEqual([{ start: 7, end: 8, label: 0, score: 1 / (1 + Math.exp(-10)) }]);
  });
});
