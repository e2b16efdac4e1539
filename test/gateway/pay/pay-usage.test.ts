import { describe, expect, it } from "vitest";
import { formatPayUsage, parsePayUsage } from "../../../gateway/pay/pay-usage.js";

describe("formatPayUsage", () => {
  it("writes the documented RFC 8941 dictionary, members in order", () => {
    expect(formatPayUsage({ slug: "tiny-gpt", inputTokens: 12, outputTokens: 34 })).toBe(
      'slug="tiny-gpt", input_tokens=12, output_tokens=34',
    );
  });

  it("writes zero counts", () => {
    expect(formatPayUsage({ slug: "nli", inputTokens: 0, outputTokens: 0 })).toBe(
      'slug="nli", input_tokens=0, output_tokens=0',
    );
  });

  it.each([
    ["an empty slug", { slug: "", inputTokens: 1, outputTokens: 1 }],
    ["a slug with a space", { slug: "tiny gpt", inputTokens: 1, outputTokens: 1 }],
    ["a slug with a newline", { slug: "tiny\r\ngpt", inputTokens: 1, outputTokens: 1 }],
    ["a non-ASCII slug", { slug: "tíny", inputTokens: 1, outputTokens: 1 }],
    ["a negative count", { slug: "s", inputTokens: -1, outputTokens: 1 }],
    ["a fractional count", { slug: "s", inputTokens: 1, outputTokens: 1.5 }],
    ["a count past 15 digits", { slug: "s", inputTokens: 1e15, outputTokens: 1 }],
    ["NaN", { slug: "s", inputTokens: Number.NaN, outputTokens: 1 }],
  ])("refuses %s rather than emit a header that does not parse", (_name, usage) => {
    expect(() => formatPayUsage(usage)).toThrow(RangeError);
  });
});

describe("parsePayUsage", () => {
  it("round-trips", () => {
    for (const usage of [
      { slug: "tiny-gpt", inputTokens: 12, outputTokens: 34 },
      { slug: "org/model:v1", inputTokens: 0, outputTokens: 999_999_999_999_999 },
      { slug: 'quote"and\\slash', inputTokens: 7, outputTokens: 0 },
    ]) {
      expect(parsePayUsage(formatPayUsage(usage))).toEqual(usage);
    }
  });

  it("reads other spellings of the same dictionary, unknown members ignored", () => {
    expect(
      parsePayUsage('output_tokens=34,input_tokens=12;x=1,  slug="tiny-gpt", cached_tokens=3'),
    ).toEqual({ slug: "tiny-gpt", inputTokens: 12, outputTokens: 34 });
  });

  it.each([
    undefined,
    "",
    "slug=tiny-gpt, input_tokens=12, output_tokens=34",
    'slug="tiny-gpt", input_tokens=12',
    'slug="tiny-gpt", input_tokens=-1, output_tokens=34',
    'slug="tiny-gpt", input_tokens=1.5, output_tokens=34',
    'slug="tiny-gpt", input_tokens=(1 2), output_tokens=34',
    'slug="tiny-gpt" input_tokens=12',
  ])("returns null for %j", (value) => {
    expect(parsePayUsage(value)).toBeNull();
  });
});
