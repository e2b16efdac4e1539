import type { ExtractedEntity } from "./extractor.js";
import type { Word } from "./span-words.js";

/**
 * From span logits to entities, as GLiNER decodes with flat_ner: sigmoid of
 * each logit, spans at or above the threshold kept, then greedily the best
 * scoring span first, dropping any that overlaps one already taken (the same
 * words under another label overlap too).
 */
export interface SpanCandidate {
  /** First and last word (inclusive) in the whole text. */
  start: number;
  end: number;
  label: number;
  score: number;
}

export interface RowLogits {
  data: Float32Array;
  /** Words, max_width and labels of the batch's logits. */
  words: number;
  maxWidth: number;
  labels: number;
}

/**
 * The spans one row scores at or above `threshold`, over its first
 * `rowWords` words and first `labelCount` labels (the rest is padding),
 * shifted by `offset` words into the whole text.
 */
export function rowCandidates(
  logits: RowLogits,
  row: number,
  rowWords: number,
  labelCount: number,
  threshold: number,
  offset: number,
): SpanCandidate[] {
  const { data, words, maxWidth, labels } = logits;
  const found: SpanCandidate[] = [];
  for (let start = 0; start < rowWords; start++) {
    for (let width = 0; width < maxWidth && start + width < rowWords; width++) {
      const base = ((row * words + start) * maxWidth + width) * labels;
      for (let label = 0; label < labelCount; label++) {
        const score = sigmoid(data[base + label]!);
        if (score >= threshold) {
          found.push({ start: offset + start, end: offset + start + width, label, score });
        }
      }
    }
  }
  return found;
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/**
 * GLiNER's greedy flat_ner choice; ties go to the earlier, then shorter, span.
 * A span two overlapping windows both scored overlaps itself: its best score is kept, once.
 */
export function selectFlat(candidates: readonly SpanCandidate[]): SpanCandidate[] {
  const ordered = [...candidates].sort(
    (a, b) => b.score - a.score || a.start - b.start || a.end - b.end || a.label - b.label,
  );
  // Spans are at most max_width words: checking the words they cover is cheaper than every span taken.
  const used = new Uint8Array(candidates.reduce((most, c) => Math.max(most, c.end + 1), 0));
  const taken: SpanCandidate[] = [];
  for (const candidate of ordered) {
    if (used.subarray(candidate.start, candidate.end + 1).includes(1)) continue;
    used.fill(1, candidate.start, candidate.end + 1);
    taken.push(candidate);
  }
  return taken.sort((a, b) => a.start - b.start);
}

/** Word spans back to the input's characters: from the first word's start to the last's end. */
export function toEntities(
  selected: readonly SpanCandidate[],
  words: readonly Word[],
  labels: readonly string[],
): ExtractedEntity[] {
  return selected.map((span) => ({
    label: labels[span.label]!,
    start: words[span.start]!.start,
    end: words[span.end]!.end,
    score: span.score,
  }));
}
