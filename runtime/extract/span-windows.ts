/**
 * Overlapping windows of words for texts longer than the model reads at once
 * (gliner_config.json max_len words, and the positions left beside the
 * prompt). Consecutive windows share `overlap` words, at least max_width, so
 * every span the model can score lies whole inside some window.
 */
export interface SpanWindow {
  /** Index of the window's first word in the whole text. */
  first: number;
  count: number;
}

export function overlapFor(maxLen: number, maxWidth: number): number {
  return Math.min(maxLen - 1, Math.max(maxWidth, Math.floor(maxLen / 4)));
}

export function planWindows(
  pieceCounts: readonly number[],
  maxWords: number,
  tokenBudget: number,
  overlap: number,
): SpanWindow[] {
  const windows: SpanWindow[] = [];
  let first = 0;
  while (first < pieceCounts.length) {
    let count = 0;
    let tokens = 0;
    while (first + count < pieceCounts.length && count < maxWords) {
      const next = pieceCounts[first + count]!;
      if (count > 0 && tokens + next > tokenBudget) break;
      tokens += next;
      count++;
    }
    windows.push({ first, count });
    if (first + count >= pieceCounts.length) break;
    first += Math.max(1, count - overlap);
  }
  return windows;
}
