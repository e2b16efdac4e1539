import type { ResponsesRequest } from "../../api/responses-request.js";

/**
 * What both zero-shot methods (NLI and sentence similarity) offer the
 * batch executor: a synchronous prepare that tokenizes and checks limits, and one
 * model run for a whole batch of prepared requests.
 */
export type LabelScores = Record<string, number>;

/**
 * The label-to-score object of one request, each label an own enumerable
 * key in label order. Labels are caller text: `scores[label] = score` would
 * set the prototype for a label named `__proto__` rather than add the key,
 * so the key is defined, never assigned; JSON.stringify then writes it as
 * any other. A repeated label keeps its first place and its last score.
 */
export function labelScores(
  labels: readonly string[],
  scoreOf: (label: string) => number,
): LabelScores {
  const scores: LabelScores = {};
  for (const label of labels) {
    Object.defineProperty(scores, label, {
      value: scoreOf(label),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return scores;
}

export interface PreparedClassification {
  labels: string[];
  inputTokens: number;
}

export interface ZeroShotClassifier<P extends PreparedClassification = PreparedClassification> {
  readonly method: "nli" | "similarity";
  prepare(request: ResponsesRequest): P;
  runBatch(batch: readonly P[]): Promise<LabelScores[]>;
}
