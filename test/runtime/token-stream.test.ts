import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { TextTokenizer } from "../../runtime/engine/tokenizer.js";
import { rememberingSingleTokens, TokenText } from "../../runtime/generation/token-stream.js";

/**
 * Incremental detokenisation with SmolLM2's real byte-level BPE tokenizer:
 * characters of 2 to 4 UTF-8 bytes are split over several tokens, and a
 * piece must never carry half of one.
 */
const MODEL = "/work/shared/models/smollm2-135m-instruct";

async function tokenizer(): Promise<TextTokenizer> {
  const json = JSON.parse(await readFile(`${MODEL}/tokenizer.json`, "utf8")) as object;
  const config = JSON.parse(await readFile(`${MODEL}/tokenizer_config.json`, "utf8")) as object;
  return new TextTokenizer(json, config);
}

describe("TokenText", () => {
  it.each([
    ["plain words", "The quick brown fox jumps over the lazy dog."],
    ["accents and CJK", "Grüße aus Köln: 東京タワー, señor — ok"],
    ["emoji and flags", "rockets 🚀🚀 family 👨‍👩‍👧 flag 🇩🇪 end"],
    ["spaces and newlines", "  two leading spaces\n\n\ttab and\r\nlines  "],
  ])("releases %s in whole characters that add up to the full decode", async (_name, text) => {
    const tok = await tokenizer();
    const ids = tok.encode(text, { addSpecialTokens: false }).ids;
    const stream = new TokenText((window) => tok.decode(window));
    const pieces = ids.map((id) => stream.push(id)).filter((piece) => piece !== "");
    const whole = tok.decode(ids);
    pieces.push(stream.finish(whole));
    for (const piece of pieces) expect(piece).not.toContain("\uFFFD");
    expect(pieces.join("")).toBe(whole);
    expect(whole).toBe(text);
  });

  it("holds back a character split over tokens until its last byte arrives", async () => {
    const tok = await tokenizer();
    const ids = tok.encode("🚀", { addSpecialTokens: false }).ids;
    // The premise: the emoji takes more than one token in this vocabulary.
    expect(ids.length).toBeGreaterThan(1);
    const stream = new TokenText((window) => tok.decode(window));
    const pieces = ids.map((id) => stream.push(id));
    expect(pieces.slice(0, -1).every((piece) => piece === "")).toBe(true);
    expect(pieces.at(-1)).toBe("🚀");
  });

  it("decodes a token alone once however many streams release it, and releases the same pieces", async () => {
    const tok = await tokenizer();
    const ids = tok.encode("the cat and the dog and the 🚀 and the cat", {
      addSpecialTokens: false,
    }).ids;
    const alone: number[] = [];
    const remembering = rememberingSingleTokens((window) => {
      if (window.length === 1) alone.push(window[0]!);
      return tok.decode(window);
    });
    const piecesOf = (decode: (window: readonly number[]) => string) => {
      const stream = new TokenText(decode);
      return ids.map((id) => stream.push(id));
    };
    const plain = piecesOf((window) => tok.decode(window));
    // Two streams of the same text: the second decodes no token alone again.
    expect(piecesOf(remembering)).toEqual(plain);
    expect(piecesOf(remembering)).toEqual(plain);
    expect(alone.length).toBeGreaterThan(0);
    expect(alone.length).toBe(new Set(alone).size);
  });
});
