/**
 * The token-limit decision of spec section 7 (420) as a pure function. The
 * model's `maxTokens` and overflow policy come from its InferenceModel.
 */
export type OverflowPolicy = "truncate" | "error";

export interface TokenLimitInput {
  inputTokens: number;
  maxTokens: number;
  policy: OverflowPolicy;
  truncation: "auto" | "disabled";
  /** Tokens kept free for the output (max_output_tokens for generation, 0 otherwise). */
  reserve: number;
}

export type TokenLimitDecision =
  { kind: "fits" } | { kind: "truncate"; budget: number } | { kind: "reject"; limit: number };

export function decideTokenLimit(input: TokenLimitInput): TokenLimitDecision {
  const canTruncate = input.policy === "truncate" && input.truncation === "auto";
  if (!canTruncate) {
    return input.inputTokens > input.maxTokens
      ? { kind: "reject", limit: input.maxTokens }
      : { kind: "fits" };
  }
  // Room for the output comes out of the input, but at most half the
  // limit: `max_output_tokens` is an upper bound, and one as long as the
  // window would otherwise cut a short input down to nothing (a 420 where
  // `truncation: disabled` answers), for an output the window cannot hold.
  const reserve = Math.min(Math.max(0, input.reserve), Math.floor(input.maxTokens / 2));
  const budget = input.maxTokens - reserve;
  return input.inputTokens > budget ? { kind: "truncate", budget } : { kind: "fits" };
}
