import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TextTokenizer } from "../../../runtime/engine/tokenizer.js";
import { normalizerFlagsFrom, tokenOffsets } from "../../../runtime/extract/token-offsets.js";
import { requireSharedModel } from "../../support/shared-models.js";

const rampart = requireSharedModel("rampart-pii", "onnx/model_q4.onnx");

/** What BERT's normalizer makes of a piece of the original: the token's text must be exactly that. */
function normalized(text: string): string {
  // The final sigma lower-cases by its context: folded to the plain one.
  return text
    .toLowerCase()
    .normalize("NFD")
    .replace(/\p{Mn}/gu, "")
    .replaceAll("ς", "σ");
}

describe.skipIf(!rampart.available)("token offsets replayed from BERT's normalization", () => {
  const json = JSON.parse(readFileSync(join(rampart.path, "tokenizer.json"), "utf8")) as Record<
    string,
    unknown
  >;
  const config = JSON.parse(
    readFileSync(join(rampart.path, "tokenizer_config.json"), "utf8"),
  ) as Record<string, unknown>;
  const tokenizer = new TextTokenizer(json, config);
  const flags = normalizerFlagsFrom(json);

  function spansOf(text: string) {
    const { ids, tokens } = tokenizer.pieces(text);
    const unknown = tokenizer.tokenId("[UNK]");
    const spans = tokenOffsets(
      text,
      tokens.map((token, i) => ({ token, unknown: ids[i] === unknown })),
      flags,
    );
    return tokens.map((token, i) => ({
      token,
      ...spans[i]!,
      text: text.slice(spans[i]!.start, spans[i]!.end),
    }));
  }

  it.each([
    "John Smith lives in Paris and his email is john@example.com",
    "Zoë Müller, ÅNGSTRÖM and Ærøskøbing",
    // A decomposed accent: e + U+0301.
    "Jose\u0301 Garci\u0301a",
    "ΣΟΦΙΑΣ and İstanbul",
    "tabs\tand\nnew\r\nlines and \u0007bells\u0000 and \u200bzero-width",
    "東京 is 東京都",
    "call (555) 123-4567 or +1 415-555-0199",
  ])("places every token of %j on the text it came from", (text) => {
    for (const span of spansOf(text)) {
      const body = span.token.startsWith("##") ? span.token.slice(2) : span.token;
      expect(normalized(span.text), JSON.stringify(span)).toBe(normalized(body));
    }
  });

  it("keeps a decomposed accent with its letter", () => {
    const spans = spansOf("Jose\u0301 Garci\u0301a");
    expect(spans[0]!.text).toBe("Jose\u0301");
  });

  it("gives an unknown word ([UNK]) the whole word, with UTF-16 offsets past an emoji", () => {
    const text = "hi 😀 john@example.com";
    const spans = spansOf(text);
    const unknown = spans.find((s) => s.token === "[UNK]")!;
    expect([unknown.start, unknown.end, unknown.text]).toEqual([3, 5, "😀"]);
    const john = spans.find((s) => s.token === "john")!;
    expect([john.start, john.end]).toEqual([6, 10]);
  });

  it("places a special token typed in the text over its characters", () => {
    const spans = spansOf("a [MASK] b");
    expect(spans.map((s) => s.text)).toEqual(["a", "[MASK]", "b"]);
  });
});
