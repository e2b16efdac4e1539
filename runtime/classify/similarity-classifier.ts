import type { ResponsesRequest } from "../../api/responses-request.js";
import { parseCandidateLabels } from "../../api/candidate-labels.js";
import { RuntimeErrors } from "../errors.js";
import type { ModelSession } from "../engine/session.js";
import type { Encoded, TextTokenizer } from "../engine/tokenizer.js";
import { truncateStart } from "../engine/truncate-text.js";
import { decideTokenLimit, type OverflowPolicy } from "../token-limit.js";
import {
  labelScores,
  type LabelScores,
  type PreparedClassification,
  type ZeroShotClassifier,
} from "./classifier.js";
import { padBatch } from "./pad-batch.js";

/**
 * Zero-shot classification with a sentence-embedding model: the input and a
 * hypothesis per label are embedded in one batch, and each label's score is
 * its cosine similarity to the input, mapped into [0, 1] by a logistic
 * calibration. Scores are independent: they need not sum to one.
 */
export const DEFAULT_SIMILARITY_TEMPLATE = "This example is about {}.";

/** score = 1 / (1 + exp(-steepness * (cosine - midpoint))). See docs/zero-shot.md. */
export interface Calibration {
  midpoint: number;
  steepness: number;
}
export const DEFAULT_CALIBRATION: Calibration = { midpoint: 0.2, steepness: 10 };

export type Pooling = "mean" | "cls";

export function poolingFrom(config: Record<string, unknown> | null): Pooling {
  if (config?.pooling_mode_cls_token === true) return "cls";
  return "mean";
}

export function calibrate(cosine: number, calibration: Calibration): number {
  return 1 / (1 + Math.exp(-calibration.steepness * (cosine - calibration.midpoint)));
}

/** Pools one row of [seq, hidden] states over its mask and L2-normalises it. */
export function poolRow(
  states: Float32Array,
  mask: BigInt64Array,
  length: number,
  hidden: number,
  pooling: Pooling,
): Float32Array {
  const out = new Float32Array(hidden);
  if (pooling === "cls") {
    out.set(states.subarray(0, hidden));
  } else {
    let count = 0;
    for (let t = 0; t < length; t++) {
      if (mask[t] === 0n) continue;
      count++;
      for (let h = 0; h < hidden; h++) out[h]! += states[t * hidden + h]!;
    }
    for (let h = 0; h < hidden; h++) out[h] = out[h]! / Math.max(1, count);
  }
  let norm = 0;
  for (let h = 0; h < hidden; h++) norm += out[h]! * out[h]!;
  norm = Math.sqrt(norm) || 1;
  for (let h = 0; h < hidden; h++) out[h] = out[h]! / norm;
  return out;
}

interface PreparedSimilarity extends PreparedClassification {
  /** The input first, then one hypothesis per label. */
  texts: Encoded[];
}

export interface SimilarityOptions {
  maxTokens: number;
  policy: OverflowPolicy;
  contextLength: number;
  padId: number;
  hasTokenTypes: boolean;
  outputName: string;
  pooling: Pooling;
  hypothesisTemplate: string;
  calibration?: Partial<Calibration> | undefined;
}

export class SimilarityClassifier implements ZeroShotClassifier<PreparedSimilarity> {
  readonly method = "similarity" as const;
  private readonly calibration: Calibration;
  private readonly specials: number;

  constructor(
    private readonly session: ModelSession,
    private readonly tokenizer: TextTokenizer,
    private readonly options: SimilarityOptions,
  ) {
    this.calibration = { ...DEFAULT_CALIBRATION, ...options.calibration };
    this.specials = tokenizer.encode("").ids.length;
  }

  private tokens(text: string): number {
    return this.tokenizer.encode(text, { addSpecialTokens: false }).ids.length;
  }

  /** Embeds texts in one model run; rows are pooled and normalised. */
  async embed(texts: readonly Encoded[]): Promise<Float32Array[]> {
    const padded = padBatch(texts, this.options.padId);
    const outputs = await this.session.run({
      input_ids: padded.inputIds,
      attention_mask: padded.attentionMask,
      ...(this.options.hasTokenTypes ? { token_type_ids: padded.tokenTypeIds } : {}),
    });
    const states = outputs[this.options.outputName];
    if (!states) throw new Error(`the graph returned no '${this.options.outputName}' output`);
    const hidden = states.dims[2]!;
    const data = states.data as Float32Array;
    const mask = padded.attentionMask.data as BigInt64Array;
    const length = padded.length;
    return texts.map((_, r) =>
      poolRow(
        data.subarray(r * length * hidden, (r + 1) * length * hidden),
        mask.subarray(r * length, (r + 1) * length),
        length,
        hidden,
        this.options.pooling,
      ),
    );
  }

  prepare(request: ResponsesRequest): PreparedSimilarity {
    const labels = parseCandidateLabels(request);
    const limit = Math.min(this.options.maxTokens, this.options.contextLength - this.specials);
    let input = request.input;
    const inputTokens = this.tokens(input);
    const decision = decideTokenLimit({
      inputTokens,
      maxTokens: limit,
      policy: this.options.policy,
      truncation: request.truncation,
      reserve: 0,
    });
    if (decision.kind === "reject")
      throw RuntimeErrors.contextLengthExceeded(inputTokens, decision.limit);
    if (decision.kind === "truncate") {
      input = truncateStart(this.tokenizer, input, decision.budget, (t) => this.tokens(t)) ?? "";
    }
    const hypotheses = labels.map((label) =>
      this.options.hypothesisTemplate.replaceAll("{}", label),
    );
    // Hypotheses are short, but a label is caller text: cut it to the context too.
    const texts = [input, ...hypotheses].map((text) => {
      const encoded = this.tokenizer.encode(text);
      return encoded.ids.length <= this.options.contextLength
        ? encoded
        : this.tokenizer.encode(
            truncateStart(this.tokenizer, text, limit, (t) => this.tokens(t)) ?? "",
          );
    });
    const usage = texts.reduce((sum, t) => sum + t.ids.length - this.specials, 0);
    return { labels, texts, inputTokens: usage };
  }

  async runBatch(batch: readonly PreparedSimilarity[]): Promise<LabelScores[]> {
    const embeddings = await this.embed(batch.flatMap((item) => item.texts));
    let row = 0;
    return batch.map((item) => {
      const input = embeddings[row++]!;
      return labelScores(item.labels, () =>
        calibrate(dot(input, embeddings[row++]!), this.calibration),
      );
    });
  }
}

function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}
