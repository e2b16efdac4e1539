/**
 * Splits text into words the way GLiNER's default ("whitespace") splitter
 * does: the regex `\w+(?:[-_]\w+)*|\S`, so a word is a run of letters, digits
 * and underscores (hyphen- or underscore-joined runs stay one word) and every
 * other non-space character is a word of its own. Python's `\w` on text is
 * any letter or number plus "_", written here with Unicode classes; the `u`
 * flag makes `\S` take a whole code point, so an emoji is one word and
 * offsets never split a surrogate pair.
 */
const WORD = /[\p{L}\p{N}_]+(?:[-_][\p{L}\p{N}_]+)*|\S/gu;

export interface Word {
  text: string;
  /** UTF-16 index of the first character in the original input. */
  start: number;
  /** UTF-16 index just past the last character. */
  end: number;
}

export function splitWords(text: string): Word[] {
  const words: Word[] = [];
  for (const match of text.matchAll(WORD)) {
    words.push({ text: match[0], start: match.index, end: match.index + match[0].length });
  }
  return words;
}
