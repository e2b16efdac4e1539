/**
 * Splitting a token sequence longer than the model's positions into
 * overlapping windows. Each token is read from exactly one window, the one
 * that "owns" it: owned regions meet in the middle of each overlap, so every
 * token is judged with at least half the overlap of context on both sides,
 * and an entity found in two windows is read once instead of deduplicated.
 */

export interface TokenWindow {
  /** The window's tokens: [start, end) of the sequence. */
  start: number;
  end: number;
  /** The tokens this window's predictions are used for: [ownStart, ownEnd). */
  ownStart: number;
  ownEnd: number;
}

export function splitWindows(length: number, capacity: number, overlap: number): TokenWindow[] {
  if (capacity < 1) throw new Error(`window capacity must be positive, got ${capacity}`);
  if (length <= capacity) return [{ start: 0, end: length, ownStart: 0, ownEnd: length }];
  const shared = Math.max(0, Math.min(overlap, capacity - 1));
  const stride = capacity - shared;
  const starts: number[] = [];
  for (let start = 0; ; start += stride) {
    starts.push(start);
    if (start + capacity >= length) break;
  }
  const half = Math.floor(shared / 2);
  return starts.map((start, k) => {
    const next = starts[k + 1];
    return {
      start,
      end: Math.min(length, start + capacity),
      ownStart: k === 0 ? 0 : start + half,
      ownEnd: next === undefined ? length : next + half,
    };
  });
}
