import type { TextTokenizer } from "./tokenizer.js";

/**
 * Drops the start of `text` until `measure(text)` is at most `budget`,
 * keeping the end, as the Responses API's `truncation: auto` keeps the end
 * of a conversation. Cuts on token boundaries of the model's own tokenizer;
 * re-measures because a cut can change how the remainder tokenizes.
 * Returns null when even an empty text does not fit.
 */
export function truncateStart(
  tokenizer: TextTokenizer,
  text: string,
  budget: number,
  measure: (text: string) => number,
): string | null {
  if (measure("") > budget) return null;
  const ids = tokenizer.encode(text, { addSpecialTokens: false }).ids;
  let drop = Math.max(1, measure(text) - budget);
  for (;;) {
    if (drop >= ids.length) return "";
    const kept = tokenizer.decode(ids.slice(drop), { skipSpecialTokens: false });
    const over = measure(kept) - budget;
    if (over <= 0) return kept;
    drop += over;
  }
}
