import { describe, expect, it } from "vitest";
import { splitWords } from "../../../runtime/extract/span-words.js";
import { overlapFor, planWindows } from "../../../runtime/extract/span-windows.js";
import { wordsTakeLeadingSpace } from "../../../runtime/extract/span-prompt.js";
import { TextTokenizer } from "../../../runtime/engine/tokenizer.js";
import { readModelFolder } from "../../../runtime/model/model-folder.js";
import { fixtureFolder } from "../support/runtime-server.js";

describe("GLiNER's whitespace word splitter", () => {
  it("keeps hyphen- and underscore-joined runs whole and makes other symbols words", () => {
    const text = "state-of-the-art e_mail: don't  x--y";
    expect(splitWords(text).map((w) => w.text)).toEqual([
      "state-of-the-art",
      "e_mail",
      ":",
      "don",
      "'",
      "t",
      "x",
      "-",
      "-",
      "y",
    ]);
  });

  it("gives UTF-16 offsets that cut the original text back into its words", () => {
    const text = "Zoë 😀 naïve\u00a0日本語 x";
    const words = splitWords(text);
    expect(words.map((w) => text.slice(w.start, w.end))).toEqual(words.map((w) => w.text));
    expect(words.map((w) => w.text)).toEqual(["Zoë", "😀", "naïve", "日本語", "x"]);
    expect(words[1]).toEqual({ text: "😀", start: 4, end: 6 });
  });
});

describe("windows of words", () => {
  it("cover every word, overlap by the given words, and respect the token budget", () => {
    expect(planWindows(Array<number>(10).fill(1), 4, 100, 2)).toEqual([
      { first: 0, count: 4 },
      { first: 2, count: 4 },
      { first: 4, count: 4 },
      { first: 6, count: 4 },
    ]);
    expect(planWindows([3, 3, 3, 3], 10, 6, 1)).toEqual([
      { first: 0, count: 2 },
      { first: 1, count: 2 },
      { first: 2, count: 2 },
    ]);
    // A word longer than the budget is a window of its own; progress never stops.
    expect(planWindows([1, 50, 1], 10, 6, 3)).toEqual([
      { first: 0, count: 1 },
      { first: 1, count: 1 },
      { first: 2, count: 1 },
    ]);
    expect(planWindows([], 4, 10, 1)).toEqual([]);
  });

  it("overlap at least max_width words", () => {
    expect(overlapFor(384, 12)).toBe(96);
    expect(overlapFor(24, 4)).toBe(6);
    expect(overlapFor(8, 12)).toBe(7);
  });
});

describe("encoding pre-split words", () => {
  const tokenizerOf = async (name: string) => {
    const files = await readModelFolder(await fixtureFolder(name));
    return new TextTokenizer(files.tokenizerJson, files.tokenizerConfig);
  };

  it("puts a space before each word for byte-level BPE only, as add_prefix_space does", async () => {
    const bpe = await tokenizerOf("tiny-gpt");
    expect(wordsTakeLeadingSpace(bpe)).toBe(true);
    // The pieces a word has in running text, which is what the model was trained on.
    const running = bpe.encode("hello world", { addSpecialTokens: false }).ids;
    const hello = bpe.encode("hello", { addSpecialTokens: false }).ids;
    expect(running.slice(hello.length)).toEqual(
      bpe.encode(" world", { addSpecialTokens: false }).ids,
    );
    expect(wordsTakeLeadingSpace(await tokenizerOf("tiny-gliner"))).toBe(false);
    expect(wordsTakeLeadingSpace(await tokenizerOf("tiny-nli"))).toBe(false);
  });
});
