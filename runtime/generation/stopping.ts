/** Why generation ended. `length` covers both max_output_tokens and the token limit. */
export type StopReason = "eos" | "length" | "aborted";

export interface StoppingCriteria {
  maxNewTokens: number;
  eosIds: ReadonlySet<number>;
  signal?: AbortSignal | undefined;
}

/** Checked after each sampled token; `null` means go on. */
export function shouldStop(
  token: number,
  generatedCount: number,
  criteria: StoppingCriteria,
): StopReason | null {
  if (criteria.eosIds.has(token)) return "eos";
  if (generatedCount >= criteria.maxNewTokens) return "length";
  if (criteria.signal?.aborted) return "aborted";
  return null;
}

/** End-of-sequence ids: generation_config.json first, as transformers reads them. */
export function eosIdsFrom(
  generationConfig: Record<string, unknown> | null,
  config: Record<string, unknown>,
): Set<number> {
  const raw = generationConfig?.eos_token_id ?? config.eos_token_id;
  const list = Array.isArray(raw) ? raw : [raw];
  return new Set(list.filter((id): id is number => typeof id === "number"));
}
