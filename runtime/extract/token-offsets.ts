/**
 * Character offsets of WordPiece tokens in the original input. The tokenizer
 * library gives token strings but no offsets, and its BERT normalizer changes
 * the text (lower case, accents stripped, control characters dropped, spaces
 * around CJK characters), so the offsets are found by replaying that
 * normalization one code point at a time, keeping for each normalized
 * character the original code point it came from, and walking the tokens
 * along the normalized text. Offsets are UTF-16 indices, end exclusive.
 */

export interface TokenSpan {
  start: number;
  end: number;
}

/** What the replay needs from tokenizer.json's BertNormalizer. */
export interface NormalizerFlags {
  cleanText: boolean;
  handleChineseChars: boolean;
  lowercase: boolean;
  stripAccents: boolean;
}

/** BertNormalizer's flags from tokenizer.json, with the library's defaults. */
export function normalizerFlagsFrom(tokenizerJson: Record<string, unknown>): NormalizerFlags {
  const config = (tokenizerJson.normalizer ?? {}) as Record<string, unknown>;
  const lowercase = config.lowercase !== false;
  return {
    cleanText: config.clean_text !== false,
    handleChineseChars: config.handle_chinese_chars !== false,
    lowercase,
    // null means "as lowercase does", as in the library.
    stripAccents:
      config.strip_accents === null || config.strip_accents === undefined
        ? lowercase
        : config.strip_accents === true,
  };
}

// The library's own classes, so both sides agree on every character.
const CONTROL = /^(?:\p{Cc}|\p{Cf}|\p{Co}|\p{Cs})$/u;
const WHITESPACE = /^\s$/u;
const MARK = /\p{Mn}/gu;
const PUNCTUATION = /^[\p{P}\u0021-\u002F\u003A-\u0040\u005B-\u0060\u007B-\u007E]$/u;
const ANY_MARK = /^\p{M}$/u;

function isChinese(unit: number): boolean {
  return (
    (unit >= 0x4e00 && unit <= 0x9fff) ||
    (unit >= 0x3400 && unit <= 0x4dbf) ||
    (unit >= 0xf900 && unit <= 0xfaff)
  );
}

/** The normalized text, and for each of its UTF-16 units the original code point's start. */
interface Normalized {
  text: string;
  origin: Int32Array;
  /** UTF-16 length of the original code point each unit came from. */
  width: Uint8Array;
}

function normalize(input: string, flags: NormalizerFlags): Normalized {
  const parts: string[] = [];
  const origin: number[] = [];
  const width: number[] = [];
  const emit = (piece: string, at: number, size: number) => {
    parts.push(piece);
    for (let k = 0; k < piece.length; k++) {
      origin.push(at);
      width.push(size);
    }
  };
  for (let i = 0; i < input.length;) {
    const cp = input.codePointAt(i)!;
    const size = cp > 0xffff ? 2 : 1;
    const at = i;
    i += size;
    // ASCII, nearly all of every input: no regular expression needed.
    if (cp < 0x80) {
      if (cp === 0x20 || cp === 0x09 || cp === 0x0a || cp === 0x0d) emit(" ", at, 1);
      else if (cp < 0x20 || cp === 0x7f) {
        if (!flags.cleanText) emit(String.fromCharCode(cp), at, 1);
      } else if (flags.lowercase && cp >= 0x41 && cp <= 0x5a)
        emit(String.fromCharCode(cp + 32), at, 1);
      else emit(String.fromCharCode(cp), at, 1);
      continue;
    }
    let char = input.slice(at, at + size);
    if (flags.cleanText) {
      if (cp === 0xfffd || CONTROL.test(char)) continue;
      if (WHITESPACE.test(char)) char = " ";
    }
    if (flags.lowercase) char = char.toLowerCase();
    if (flags.stripAccents) char = char.normalize("NFD").replace(MARK, "");
    if (flags.handleChineseChars && size === 1 && isChinese(cp)) char = ` ${char} `;
    emit(char, at, size);
  }
  return { text: parts.join(""), origin: Int32Array.from(origin), width: Uint8Array.from(width) };
}

/** Where the WordPiece `token` (continuation pieces start with `##`) lies, or null when unknown. */
export interface TokenPiece {
  token: string;
  /** `[UNK]`: stands for a whole pre-tokenized word whose pieces are not in the vocabulary. */
  unknown: boolean;
}

function isSpace(unit: string | undefined): boolean {
  return unit === " ";
}

/**
 * Offsets of each token of `input` (encoded without special tokens, in
 * order). A token the walk cannot place (a tokenizer whose normalization
 * differs from the replay) gets the offsets of the text it would cover by
 * length, never offsets outside the input.
 */
export function tokenOffsets(
  input: string,
  pieces: readonly TokenPiece[],
  flags: NormalizerFlags,
): TokenSpan[] {
  const norm = normalize(input, flags);
  const text = norm.text;
  const spans: TokenSpan[] = [];
  let cursor = 0;
  for (const piece of pieces) {
    const continuation = piece.token.startsWith("##") && piece.token.length > 2;
    if (!continuation) while (isSpace(text[cursor])) cursor++;
    let end: number;
    if (piece.unknown) {
      end = wordEnd(text, cursor);
    } else {
      const body = continuation ? piece.token.slice(2) : piece.token;
      end = Math.min(text.length, cursor + body.length);
    }
    if (end <= cursor || cursor >= text.length) {
      // Nothing left to cover: an empty span at the end keeps the offsets in range.
      const at = text.length > 0 ? norm.origin[text.length - 1]! + norm.width[text.length - 1]! : 0;
      spans.push({ start: at, end: at });
      continue;
    }
    const start = norm.origin[cursor]!;
    let stop = norm.origin[end - 1]! + norm.width[end - 1]!;
    // Marks the normalizer dropped after the last letter belong to it.
    while (stop < input.length && ANY_MARK.test(charAt(input, stop)))
      stop += charAt(input, stop).length;
    spans.push({ start, end: stop });
    cursor = end;
  }
  return spans;
}

function charAt(input: string, index: number): string {
  return String.fromCodePoint(input.codePointAt(index)!);
}

/** The end of the pre-tokenized word at `from`: one punctuation character, or a run up to a space or punctuation. */
function wordEnd(text: string, from: number): number {
  if (from >= text.length) return from;
  const first = String.fromCodePoint(text.codePointAt(from)!);
  if (PUNCTUATION.test(first)) return from + first.length;
  let i = from;
  while (i < text.length) {
    const char = String.fromCodePoint(text.codePointAt(i)!);
    if (char === " " || PUNCTUATION.test(char)) break;
    i += char.length;
  }
  return i;
}
