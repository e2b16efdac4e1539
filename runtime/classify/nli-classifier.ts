import type { ResponsesRequest } from "../../api/responses-request.js";
import { parseCandidateLabels } from "../../api/candidate-labels.js";
import { RuntimeErrors, modelLoadError } from "../errors.js";
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
 * Zero-shot classification with an NLI model: the input is the premise, each
 * label becomes a hypothesis, and the label's score is the probability of
 * entailment against contradiction, so every label is judged on its own.
 */
export const DEFAULT_NLI_TEMPLATE = "This example is {}.";

export interface NliLabels {
  entailment: number;
  contradiction: number | null;
}

/** Finds the entailment and contradiction outputs from config.json's id2label. */
export function nliLabelsFrom(config: Record<string, unknown>, where: string): NliLabels {
  const id2label = (config.id2label ?? {}) as Record<string, unknown>;
  let entailment: number | null = null;
  let contradiction: number | null = null;
  for (const [id, label] of Object.entries(id2label)) {
    const name = String(label).toLowerCase();
    if (name.startsWith("entail")) entailment = Number(id);
    if (name.startsWith("contradict")) contradiction = Number(id);
  }
  if (entailment === null) {
    throw modelLoadError(
      `${where}: config.json id2label has no entailment label; not an NLI model (labels: ${JSON.stringify(id2label)})`,
    );
  }
  return { entailment, contradiction };
}

interface PreparedNli extends PreparedClassification {
  pairs: Encoded[];
}

export interface NliOptions {
  maxTokens: number;
  policy: OverflowPolicy;
  /** Longest pair the model's position embeddings allow. */
  contextLength: number;
  padId: number;
  hypothesisTemplate: string;
  labels: NliLabels;
  hasTokenTypes: boolean;
}

export class NliClassifier implements ZeroShotClassifier<PreparedNli> {
  readonly method = "nli" as const;
  private readonly pairSpecials: number;

  constructor(
    private readonly session: ModelSession,
    private readonly tokenizer: TextTokenizer,
    private readonly options: NliOptions,
  ) {
    this.pairSpecials = tokenizer.encode("", { pair: "" }).ids.length;
  }

  private tokens(text: string): number {
    return this.tokenizer.encode(text, { addSpecialTokens: false }).ids.length;
  }

  /** Labels repeat from request to request: their hypotheses are counted once. */
  private readonly hypothesisCounts = new Map<string, number>();

  private hypothesisTokens(hypothesis: string): number {
    let count = this.hypothesisCounts.get(hypothesis);
    if (count === undefined) {
      count = this.tokens(hypothesis);
      if (this.hypothesisCounts.size >= 4096) this.hypothesisCounts.clear();
      this.hypothesisCounts.set(hypothesis, count);
    }
    return count;
  }

  prepare(request: ResponsesRequest): PreparedNli {
    const labels = parseCandidateLabels(request);
    const hypotheses = labels.map((label) =>
      this.options.hypothesisTemplate.replaceAll("{}", label),
    );
    const hypothesisTokens = hypotheses.map((h) => this.hypothesisTokens(h));
    const room = this.options.contextLength - this.pairSpecials - Math.max(0, ...hypothesisTokens);
    const limit = Math.min(this.options.maxTokens, room);
    let premise = request.input;
    const premiseTokens = this.tokens(premise);
    const decision = decideTokenLimit({
      inputTokens: premiseTokens,
      maxTokens: limit,
      policy: this.options.policy,
      truncation: request.truncation,
      reserve: 0,
    });
    if (decision.kind === "reject") {
      throw RuntimeErrors.contextLengthExceeded(premiseTokens, decision.limit);
    }
    if (decision.kind === "truncate") {
      premise =
        truncateStart(this.tokenizer, premise, decision.budget, (t) => this.tokens(t)) ?? "";
    }
    const pairs = hypotheses.map((hypothesis) =>
      this.tokenizer.encode(premise, { pair: hypothesis }),
    );
    const keptTokens = premise === request.input ? premiseTokens : this.tokens(premise);
    const inputTokens = keptTokens + hypothesisTokens.reduce((a, b) => a + b, 0);
    return { labels, pairs, inputTokens };
  }

  async runBatch(batch: readonly PreparedNli[]): Promise<LabelScores[]> {
    const rows = batch.flatMap((item) => item.pairs);
    const padded = padBatch(rows, this.options.padId);
    const feeds = {
      input_ids: padded.inputIds,
      attention_mask: padded.attentionMask,
      ...(this.options.hasTokenTypes ? { token_type_ids: padded.tokenTypeIds } : {}),
    };
    const outputs = await this.session.run(feeds);
    const logits = outputs.logits;
    if (!logits) throw new Error("the NLI graph returned no 'logits' output");
    const classes = logits.dims[1]!;
    const data = logits.data as Float32Array;
    let row = 0;
    return batch.map((item) =>
      labelScores(item.labels, () => {
        const score = entailmentScore(
          data.subarray(row * classes, (row + 1) * classes),
          this.options.labels,
        );
        row++;
        return score;
      }),
    );
  }
}

/** P(entailment) from a softmax over entailment and contradiction only. */
export function entailmentScore(logits: Float32Array, labels: NliLabels): number {
  const entail = logits[labels.entailment]!;
  if (labels.contradiction === null) {
    const max = Math.max(...logits);
    const sum = logits.reduce((acc, v) => acc + Math.exp(v - max), 0);
    return Math.exp(entail - max) / sum;
  }
  const contra = logits[labels.contradiction]!;
  return 1 / (1 + Math.exp(contra - entail));
}
