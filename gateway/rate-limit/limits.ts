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
