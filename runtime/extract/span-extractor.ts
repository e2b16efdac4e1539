import { ENTITY_LABELS_MAX } from "../../api/entity-options.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { RuntimeErrors } from "../errors.js";
import type { ModelSession } from "../engine/session.js";
import type { TextTokenizer } from "../engine/tokenizer.js";
import type {
  EntityExtractor,
  ExtractedEntity,
  ExtractionSettings,
  PreparedExtraction,
} from "./extractor.js";
import { checkSpanSignature, readSpanConfig, SPAN_OUTPUT, type SpanConfig } from "./span-config.js";
import { rowCandidates, selectFlat, toEntities } from "./span-decode.js";
import type { SpanCandidate } from "./span-decode.js";
import { buildSpanFeeds } from "./span-feeds.js";
import { SpanPromptEncoder, type SpanRow } from "./span-prompt.js";
import { overlapFor, planWindows, type SpanWindow } from "./span-windows.js";
import { splitWords, type Word } from "./span-words.js";

/**
 * Zero-shot entity extraction with a GLiNER span model: the request's labels
 * become the prompt, every span of up to max_width words is scored against
 * each label in one run, and GLiNER's flat decoding picks non-overlapping
 * entities. Long texts go in overlapping windows whose results are merged.
 */

/**
 * Most labels one request may ask of a span model: GLiNER's max_types, the
 * number of entity types its checkpoints are trained to read in one prompt,
 * and the request schema's bound on metadata.labels.
 */
export const SPAN_LABELS_MAX = ENTITY_LABELS_MAX;
/** Rows (windows) per model run: a long text's windows are run a few at a time. */
const ROWS_PER_RUN = 8;
/** Text tokens a window keeps beside the prompt, at the least: labels must leave room. */
const MIN_TEXT_TOKENS = 16;

export interface SpanExtractorOptions {
  /** The InferenceModel's maxTokens: the most text tokens a request may carry; null for no bound. */
  maxTokens: number | null;
  /** Positions the encoder takes: a window's prompt and text together. */
  contextLength: number;
  padId: number;
}

export interface PreparedSpan extends PreparedExtraction {
  labels: string[];
  words: Word[];
  windows: SpanWindow[];
  rows: SpanRow[];
}

export class SpanExtractor implements EntityExtractor<PreparedSpan> {
  readonly method = "span" as const;
  readonly labels = null;
  private readonly overlap: number;

  constructor(
    private readonly session: ModelSession,
    private readonly encoder: SpanPromptEncoder,
    private readonly config: SpanConfig,
    private readonly options: SpanExtractorOptions,
  ) {
    this.overlap = overlapFor(config.maxLen, config.maxWidth);
  }

  prepare(text: string, settings: ExtractionSettings): PreparedSpan {
    const labels = this.requestLabels(settings.labels);
    const built = this.encoder.promptIds(labels);
    if ("badLabel" in built) {
      throw HttpErrors.invalidRequest(
        `The label '${built.badLabel}' holds one of the model's prompt markers (${this.config.entToken}, ${this.config.sepToken}); remove it.`,
        "metadata.labels",
      );
    }
    const prompt = built.ids;
    const budget = this.options.contextLength - this.encoder.frameTokens(prompt);
    if (budget < MIN_TEXT_TOKENS) {
      throw HttpErrors.invalidRequest(
        `The labels take ${prompt.length} tokens of the model's ${this.options.contextLength}; shorten or remove some labels.`,
        "metadata.labels",
      );
    }
    const words = splitWords(text);
    const pieces = words.map((word) => this.encoder.pieces(word.text));
    const textTokens = pieces.reduce((sum, p) => sum + p.length, 0);
    // Never truncated, as with token classification: a masked answer must not keep an unread tail.
    if (this.options.maxTokens !== null && textTokens > this.options.maxTokens) {
      throw RuntimeErrors.contextLengthExceeded(textTokens, this.options.maxTokens);
    }
    const counts = pieces.map((p) => p.length);
    const windows = planWindows(counts, this.config.maxLen, budget, this.overlap);
    const rows = windows.map((w) =>
      this.encoder.row(prompt, pieces.slice(w.first, w.first + w.count), budget),
    );
    // Metered once: the text and the prompt, however many windows repeat the prompt.
    return {
      text,
      settings,
      inputTokens: textTokens + prompt.length,
      labels,
      words,
      windows,
      rows,
    };
  }

  private requestLabels(requested: readonly string[] | null): string[] {
    if (requested === null || requested.length === 0) {
      throw HttpErrors.invalidRequest(
        "A span (zero-shot) model needs the entity types to look for: set metadata.labels or a metadata.usecase.",
        "metadata.labels",
      );
    }
    const labels = [...new Set(requested)];
    if (labels.length > SPAN_LABELS_MAX) {
      throw HttpErrors.invalidRequest(
        `At most ${SPAN_LABELS_MAX} labels may be asked of this model; got ${labels.length}.`,
        "metadata.labels",
      );
    }
    return labels;
  }

  async runBatch(batch: readonly PreparedSpan[]): Promise<ExtractedEntity[][]> {
    const rows = batch.flatMap((item, i) =>
      item.rows.map((row, r) => ({ row, item: i, window: item.windows[r]! })),
    );
    const found: SpanCandidate[][] = batch.map(() => []);
    for (let at = 0; at < rows.length; at += ROWS_PER_RUN) {
      const chunk = rows.slice(at, at + ROWS_PER_RUN);
      const { feeds, words } = buildSpanFeeds(
        chunk.map((c) => c.row),
        this.config.maxWidth,
        this.options.padId,
      );
      const out = (await this.session.run(feeds, [SPAN_OUTPUT]))[SPAN_OUTPUT];
      if (!out) throw new Error(`the span model returned no '${SPAN_OUTPUT}' output`);
      const logits = {
        data: out.data as Float32Array,
        words,
        maxWidth: this.config.maxWidth,
        labels: out.dims[3] ?? 0,
      };
      chunk.forEach(({ row, item, window }, r) => {
        const prepared = batch[item]!;
        found[item]!.push(
          ...rowCandidates(
            logits,
            r,
            row.words,
            prepared.labels.length,
            prepared.settings.threshold,
            window.first,
          ),
        );
      });
    }
    return batch.map((item, i) => toEntities(selectFlat(found[i]!), item.words, item.labels));
  }
}

/**
 * Builds the span extractor for a loaded session: reads gliner_config.json
 * from the folder and checks the graph takes GLiNER's span-mode inputs.
 */
export async function loadSpanExtractor(
  session: ModelSession,
  tokenizer: TextTokenizer,
  folder: string,
  options: SpanExtractorOptions,
): Promise<SpanExtractor> {
  checkSpanSignature(folder, session.inputs, session.outputs);
  const config = await readSpanConfig(folder);
  const encoder = new SpanPromptEncoder(tokenizer, config, folder);
  return new SpanExtractor(session, encoder, config, options);
}
