import { RuntimeErrors } from "../errors.js";
import type { ModelSession } from "../engine/session.js";
import type { TextTokenizer } from "../engine/tokenizer.js";
import { padBatch } from "../classify/pad-batch.js";
import { entityTypes, joinEntities, parseTag, type Tag, type TokenPrediction } from "./bio-tags.js";
import type {
  EntityExtractor,
  ExtractedEntity,
  ExtractionSettings,
  PreparedExtraction,
} from "./extractor.js";
import { tokenOffsets, type NormalizerFlags, type TokenSpan } from "./token-offsets.js";
import { splitWindows, type TokenWindow } from "./windows.js";

/**
 * Entity extraction with a token-classification model (BERT-style, BIO tags
 * from config.json's id2label): every token gets its most probable tag, and
 * tags join into entities through the tokens' character offsets. Inputs
 * longer than the model's positions are read in overlapping windows.
 */
export interface TokenClassifierOptions {
  /** id2label in id order. */
  labels: readonly string[];
  /** Positions the model takes, special tokens included. */
  contextLength: number;
  /** The most input tokens one request may have (across windows); null for no bound. */
  maxTokens: number | null;
  /** Tokens a window shares with the next. */
  overlap: number;
  padId: number;
  hasTokenTypes: boolean;
  /** The special tokens the tokenizer puts before and after a sequence (`[CLS]`, `[SEP]`). */
  prefixIds: readonly number[];
  suffixIds: readonly number[];
  normalizer: NormalizerFlags;
  /**
   * Padded tokens per model run at most: a batch of long windows is split
   * into several runs, so attention's memory stays bounded.
   */
  maxRunTokens: number;
}

export const DEFAULT_WINDOW_OVERLAP = 128;
export const DEFAULT_MAX_RUN_TOKENS = 8192;

export interface PreparedTokens extends PreparedExtraction {
  ids: number[];
  spans: TokenSpan[];
  /** Tokens of the input that are special (`[MASK]` typed in the text): never an entity. */
  special: Uint8Array;
  windows: TokenWindow[];
}

export class TokenClassifier implements EntityExtractor<PreparedTokens> {
  readonly method = "token-classification" as const;
  readonly labels: readonly string[];
  private readonly tags: Tag[];
  private readonly specialIds: Set<number>;

  constructor(
    private readonly session: ModelSession,
    private readonly tokenizer: TextTokenizer,
    private readonly options: TokenClassifierOptions,
  ) {
    this.tags = options.labels.map(parseTag);
    this.labels = entityTypes(this.tags);
    this.specialIds = tokenizer.specialIds();
  }

  /** Content tokens a window holds: the positions less the special tokens around them. */
  get windowCapacity(): number {
    const { contextLength, prefixIds, suffixIds } = this.options;
    return contextLength - prefixIds.length - suffixIds.length;
  }

  prepare(text: string, settings: ExtractionSettings): PreparedTokens {
    const { ids, tokens } = this.tokenizer.pieces(text);
    const { maxTokens } = this.options;
    // Never truncated: a masked answer must not hand back a tail nobody read.
    if (maxTokens !== null && ids.length > maxTokens) {
      throw RuntimeErrors.contextLengthExceeded(ids.length, maxTokens);
    }
    const special = new Uint8Array(ids.length);
    const pieces = tokens.map((token, i) => {
      if (this.specialIds.has(ids[i]!)) special[i] = 1;
      return { token, unknown: ids[i] === this.unknownId };
    });
    const spans = tokenOffsets(text, pieces, this.options.normalizer);
    const windows = splitWindows(ids.length, this.windowCapacity, this.options.overlap);
    return { text, settings, inputTokens: ids.length, ids, spans, special, windows };
  }

  private get unknownId(): number | undefined {
    return this.tokenizer.tokenId("[UNK]");
  }

  async runBatch(batch: readonly PreparedTokens[]): Promise<ExtractedEntity[][]> {
    const rows: Row[] = [];
    batch.forEach((item, index) => {
      for (const window of item.windows) rows.push({ index, window });
    });
    // Similar lengths together, so short requests do not pad to a long window.
    rows.sort((a, b) => rowLength(a) - rowLength(b));
    const predictions = batch.map((item) => new Array<TokenPrediction>(item.ids.length));
    for (const group of this.runGroups(rows)) {
      await this.runGroup(group, batch, predictions);
    }
    return batch.map((item, i) => {
      const found = joinEntities(predictions[i]!);
      const { labels, threshold } = item.settings;
      const wanted = labels ? new Set(labels) : null;
      return found.filter((e) => e.score >= threshold && (!wanted || wanted.has(e.label)));
    });
  }

  /** Consecutive rows (sorted by length) whose padded size stays within the run budget. */
  private *runGroups(rows: readonly Row[]): Generator<Row[]> {
    const specials = this.options.prefixIds.length + this.options.suffixIds.length;
    let group: Row[] = [];
    for (const row of rows) {
      const length = rowLength(row) + specials;
      if (group.length > 0 && (group.length + 1) * length > this.options.maxRunTokens) {
        yield group;
        group = [];
      }
      group.push(row);
    }
    if (group.length > 0) yield group;
  }

  private async runGroup(
    group: readonly Row[],
    batch: readonly PreparedTokens[],
    predictions: TokenPrediction[][],
  ): Promise<void> {
    const { prefixIds, suffixIds, padId, hasTokenTypes } = this.options;
    const sequences = group.map(({ index, window }) => {
      const ids = [
        ...prefixIds,
        ...batch[index]!.ids.slice(window.start, window.end),
        ...suffixIds,
      ];
      return { ids, typeIds: [] };
    });
    const padded = padBatch(sequences, padId);
    const outputs = await this.session.run({
      input_ids: padded.inputIds,
      attention_mask: padded.attentionMask,
      ...(hasTokenTypes ? { token_type_ids: padded.tokenTypeIds } : {}),
    });
    const logits = outputs.logits;
    if (!logits) throw new Error("the token-classification graph returned no 'logits' output");
    const classes = logits.dims[2]!;
    const data = logits.data as Float32Array;
    group.forEach(({ index, window }, r) => {
      const item = batch[index]!;
      const out = predictions[index]!;
      for (let t = window.ownStart; t < window.ownEnd; t++) {
        const position = prefixIds.length + (t - window.start);
        const offset = (r * padded.length + position) * classes;
        const best = softmaxArgmax(data, offset, classes);
        const span = item.spans[t]!;
        out[t] = {
          tag: item.special[t] ? null : this.tags[best.index]!,
          score: best.probability,
          start: span.start,
          end: span.end,
        };
      }
    });
  }
}

interface Row {
  index: number;
  window: TokenWindow;
}

function rowLength(row: Row): number {
  return row.window.end - row.window.start;
}

/** The most probable class at `offset` and its softmax probability. */
export function softmaxArgmax(
  data: Float32Array,
  offset: number,
  classes: number,
): { index: number; probability: number } {
  let best = 0;
  let max = -Infinity;
  for (let c = 0; c < classes; c++) {
    const value = data[offset + c]!;
    if (value > max) {
      max = value;
      best = c;
    }
  }
  let sum = 0;
  for (let c = 0; c < classes; c++) sum += Math.exp(data[offset + c]! - max);
  return { index: best, probability: 1 / sum };
}
