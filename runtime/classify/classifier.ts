import type { ResponsesRequest } from "../../api/responses-request.js";

/**
 * What both zero-shot methods (NLI and sentence similarity) offer the
 * batch executor: a synchronous prepare that tokenizes and checks limits, and one
 * model run for a whole batch of prepared requests.
 */
export type LabelScores = Record<string, number>;

export interface PreparedClassification {
  labels: string[];
  inputTokens: number;
}

export interface ZeroShotClassifier<P extends PreparedClassification = PreparedClassification> {
  readonly method: "nli" | "similarity";
  prepare(request: ResponsesRequest): P;
  runBatch(batch: readonly P[]): Promise<LabelScores[]>;
}
