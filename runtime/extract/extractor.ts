/**
 * The contract every entity-extraction method meets (token classification, span), so the model service,
 * the batch lane and the route handler treat both alike.
 */

/** One entity found in the input: offsets are JS string (UTF-16) indices into the original input, end exclusive. */
export interface ExtractedEntity {
  label: string;
  start: number;
  end: number;
  score: number;
}

/** What the request asks of the extractor (already validated and resolved from usecase/labels/threshold). */
export interface ExtractionSettings {
  labels: readonly string[] | null;
  threshold: number;
}

export interface PreparedExtraction {
  text: string;
  settings: ExtractionSettings;
  inputTokens: number;
}

export interface EntityExtractor<P extends PreparedExtraction = PreparedExtraction> {
  readonly method: "token-classification" | "span";
  /** The model's fixed label set (token classification), or null when any labels may be asked (span). */
  readonly labels: readonly string[] | null;
  /** Synchronous: tokenizes, splits into windows, applies the token limit; throws the runtime's 400/420 errors. */
  prepare(text: string, settings: ExtractionSettings): P;
  /** One model run (or a few, for many windows) for a whole batch; entities sorted by start, non-overlapping. */
  runBatch(batch: readonly P[]): Promise<ExtractedEntity[][]>;
}
