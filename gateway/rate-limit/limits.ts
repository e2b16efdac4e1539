import { z } from "zod";

/**
 * A rate limit as operators write it: a sustained rate and a burst. The
 * bucket holds at most `burst` requests and refills at `requestsPerMinute`,
 * so a quiet client may send `burst` requests at once and then settles to the
 * sustained rate. The same schema is used in the keys file's per-key
 * overrides and in the gateway's defaults, so both read the same way.
 */
export const RateLimitsSchema = z
  .object({
    requestsPerMinute: z.number().positive().max(1_000_000),
    burst: z.number().int().positive().max(1_000_000),
    /**
     * Input plus output tokens a minute, also the bucket's capacity. A
     * request reserves its most tokens before it is forwarded and settles
     * the count it used after. Absent: no token limit.
     */
    tokensPerMinute: z.number().int().positive().max(1_000_000_000).optional(),
  })
  .strict();

export type RateLimits = z.infer<typeof RateLimitsSchema>;

/**
 * Defaults for an identity without an override: 10 requests a second
 * sustained, with room for a burst of 60 (a client's retry storm or a batch
 * script's opening volley) before it is asked to back off.
 */
export const DEFAULT_RATE_LIMITS: RateLimits = Object.freeze({
  requestsPerMinute: 600,
  burst: 60,
});

export function sameLimits(a: RateLimits, b: RateLimits): boolean {
  return a.requestsPerMinute === b.requestsPerMinute && a.burst === b.burst;
}

/** The token bucket of a limit with `tokensPerMinute`: a minute's worth at most. */
export function tokenBucketLimits(tokensPerMinute: number): RateLimits {
  return { requestsPerMinute: tokensPerMinute, burst: tokensPerMinute };
}

/**
 * One replica's share when the buckets cannot be shared (Valkey down): the
 * rate and the burst divided by the replica count, never below one unit, so
 * that the replicas together admit about the shared limit.
 */
export function replicaShare(limits: RateLimits, replicas: number): RateLimits {
  if (replicas <= 1) return limits;
  return {
    requestsPerMinute: limits.requestsPerMinute / replicas,
    burst: Math.max(1, Math.floor(limits.burst / replicas)),
  };
}
