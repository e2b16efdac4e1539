import { modelLoadError } from "../errors.js";
import type { TextTokenizer } from "../engine/tokenizer.js";
import type { SpanConfig } from "./span-config.js";

/**
 * GLiNER's input for one window: `[CLS] <<ENT>> label1 <<ENT>> label2 <<SEP>>
 * word1 word2 ... [SEP]`, every prompt entry and every word tokenized on its
 * own (GLiNER hands the tokenizer pre-split words), and `words_mask` holding
 * the 1-based word number at each word's first piece, 0 elsewhere.
 */
export interface SpanRow {
  ids: number[];
  wordsMask: number[];
  /** Words in this row: the model's text_lengths. */
  words: number;
}

/** Distinct words met before the piece cache starts over (a text repeats its words). */
const PIECE_CACHE_SIZE = 8192;

export class SpanPromptEncoder {
  private readonly entId: number;
  private readonly sepId: number;
  /** The tokenizer's own special tokens around one sequence ([CLS] ... [SEP] for BERT). */
  private readonly prefix: number[];
  private readonly suffix: number[];
  private readonly pieceCache = new Map<string, number[]>();
  private readonly wordPrefix: string;

  constructor(
    private readonly tokenizer: TextTokenizer,
    config: SpanConfig,
    where: string,
  ) {
    const id = (token: string) => {
      const found = tokenizer.tokenId(token);
      if (found === undefined) {
        throw modelLoadError(
          `${where}: the tokenizer has no '${token}' token, which gliner_config.json names`,
        );
      }
      return found;
    };
    this.entId = id(config.entToken);
    this.sepId = id(config.sepToken);
    // Where the special tokens go, read from the tokenizer's post-processor around a marker.
    const framed = tokenizer.encode(config.sepToken, { addSpecialTokens: true }).ids;
    const at = framed.indexOf(this.sepId);
    if (at === -1) {
      throw modelLoadError(
        `${where}: the tokenizer does not keep '${config.sepToken}' as one token`,
      );
    }
    this.prefix = framed.slice(0, at);
    this.suffix = framed.slice(at + 1);
    this.wordPrefix = wordsTakeLeadingSpace(tokenizer) ? " " : "";
  }

  /** Tokens the frame and the prompt take, beside the text's own. */
  frameTokens(prompt: readonly number[]): number {
    return this.prefix.length + prompt.length + this.suffix.length;
  }

  /**
   * `<<ENT>> label ... <<SEP>>` as ids, or the first label that holds a
   * marker itself (it would add a label, or end the prompt, in the model's eyes).
   */
  promptIds(labels: readonly string[]): { ids: number[] } | { badLabel: string } {
    const ids: number[] = [];
    for (const label of labels) {
      const pieces = this.pieces(label);
      if (pieces.includes(this.entId) || pieces.includes(this.sepId)) return { badLabel: label };
      ids.push(this.entId, ...pieces);
    }
    ids.push(this.sepId);
    return { ids };
  }

  /** A word's pieces, as the tokenizer cuts it alone. */
  pieces(word: string): number[] {
    let ids = this.pieceCache.get(word);
    if (ids === undefined) {
      ids = this.tokenizer.encode(this.wordPrefix + word, { addSpecialTokens: false }).ids;
      if (this.pieceCache.size >= PIECE_CACHE_SIZE) this.pieceCache.clear();
      this.pieceCache.set(word, ids);
    }
    return ids;
  }

  /**
   * One window's row. `budget` caps the text's tokens: only a single word
   * longer than a whole window is cut, and its first piece, the one the model
   * reads, is always kept.
   */
  row(prompt: readonly number[], words: ReadonlyArray<readonly number[]>, budget: number): SpanRow {
    const ids = [...this.prefix, ...prompt];
    const wordsMask = ids.map(() => 0);
    let room = Math.max(1, budget);
    words.forEach((pieces, w) => {
      pieces.slice(0, Math.max(1, room)).forEach((id, i) => {
        ids.push(id);
        wordsMask.push(i === 0 ? w + 1 : 0);
      });
      room -= pieces.length;
    });
    for (const id of this.suffix) {
      ids.push(id);
      wordsMask.push(0);
    }
    return { ids, wordsMask, words: words.length };
  }
}

/**
 * Whether a word alone must be encoded with a space before it to get the
 * pieces it has after another word. Byte-level BPE (RoBERTa, ModernBERT) marks
 * a word's start with the space itself ("Ġword"), and transformers encodes
 * pre-split words with that prefix space (add_prefix_space); WordPiece and
 * SentencePiece mark a word's start on their own, so their words go as they are.
 */
export function wordsTakeLeadingSpace(tokenizer: TextTokenizer): boolean {
  const ids = (text: string) => tokenizer.encode(text, { addSpecialTokens: false }).ids;
  const first = ids("a");
  const second = ids("a b").slice(first.length);
  const same = (a: readonly number[], b: readonly number[]) =>
    a.length === b.length && a.every((id, i) => id === b[i]);
  return !same(second, ids("b")) && same(second, ids(" b"));
}
