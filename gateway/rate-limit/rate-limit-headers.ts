import type { FastifyReply } from "fastify";
import type { BucketState } from "./limiter.js";

/**
 * The OpenAI API's rate-limit headers, for requests and for tokens:
 * `x-ratelimit-limit-*` (the bucket's capacity), `x-ratelimit-remaining-*`
 * (what is left after this request) and `x-ratelimit-reset-*` (how long
 * until the bucket is full again, as a duration such as `1s`, `250ms` or
 * `6m0s`). Sent on answers and on 429s alike; a 429 also has `Retry-After`.
 */
export type LimitUnit = "requests" | "tokens";

export function setRateLimitHeaders(
  reply: FastifyReply,
  unit: LimitUnit,
  state: BucketState,
): void {
  reply.header(`x-ratelimit-limit-${unit}`, String(state.limit));
  reply.header(`x-ratelimit-remaining-${unit}`, String(state.remaining));
  reply.header(`x-ratelimit-reset-${unit}`, formatResetDuration(state.resetMs));
}

/** Milliseconds as the API writes durations: `0s`, `120ms`, `1.5s`, `6m0s`, `1h2m3s`. */
export function formatResetDuration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole === 0) return "0s";
  if (whole < 1000) return `${whole}ms`;
  if (whole < 60_000) return `${Number((whole / 1000).toFixed(3))}s`;
  const totalSeconds = Math.ceil(whole / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  return hours > 0 ? `${hours}h${minutes}m${seconds}s` : `${minutes}m${seconds}s`;
}
