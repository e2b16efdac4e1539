import { describe, expect, it } from "vitest";
import { joinEntities, parseTag, type TokenPrediction } from "../../../runtime/extract/bio-tags.js";

/** Tokens over "john@example.com and Mary Ann": [tag, start, end, score]. */
function tokens(rows: Array<[string | null, number, number, number?]>): TokenPrediction[] {
  return rows.map(([label, start, end, score]) => ({
    tag: label === null ? null : parseTag(label),
    start,
    end,
    score: score ?? 0.9,
  }));
}

describe("joining token tags into entities", () => {
  it("joins pieces glued together in the text even when each is tagged B-", () => {
    const found = joinEntities(
      tokens([
        ["B-EMAIL", 0, 4, 0.8],
        ["B-EMAIL", 4, 5, 1],
        ["B-EMAIL", 5, 12, 0.9],
        ["I-EMAIL", 12, 13, 0.7],
        ["B-EMAIL", 13, 16, 1],
      ]),
    );
    expect(found.map((e) => [e.label, e.start, e.end])).toEqual([["EMAIL", 0, 16]]);
    expect(found[0]!.score).toBeCloseTo(0.88, 5);
  });

  it("keeps two B- words apart, and joins an I- word across a space", () => {
    const found = joinEntities(
      tokens([
        ["B-GIVEN_NAME", 21, 25],
        ["B-GIVEN_NAME", 26, 29],
        ["B-STREET_NAME", 30, 35],
        ["I-STREET_NAME", 36, 42],
      ]),
    );
    expect(found.map((e) => [e.label, e.start, e.end])).toEqual([
      ["GIVEN_NAME", 21, 25],
      ["GIVEN_NAME", 26, 29],
      ["STREET_NAME", 30, 42],
    ]);
  });

  it("never gives an entity to O, special tokens or another type's I-", () => {
    const found = joinEntities(
      tokens([
        [null, 0, 0],
        ["B-CITY", 0, 5],
        ["O", 6, 8],
        ["I-CITY", 9, 12],
        ["I-STATE", 12, 14],
        [null, 14, 20],
      ]),
    );
    expect(found.map((e) => [e.label, e.start, e.end])).toEqual([
      ["CITY", 0, 5],
      ["CITY", 9, 12],
      ["STATE", 12, 14],
    ]);
  });

  it("reads BIOES and unprefixed labels", () => {
    expect(parseTag("E-PER")).toEqual({ prefix: "E", type: "PER" });
    expect(parseTag("O")).toEqual({ prefix: "O", type: "" });
    expect(parseTag("EMAIL")).toEqual({ prefix: "I", type: "EMAIL" });
  });
});
