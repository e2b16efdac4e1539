import type { RateLimits } from "./limits.js";

/**
 * What the rate-limit hooks ask of a limiter, whether its buckets live in
 * this process (one replica) or in Valkey (every replica shares them). Both
 * implementations take the same bucket arithmetic: a bucket holds at most
 * `burst` units and refills at `perMinute`.
 */
export interface BucketTake {
  /** The bucket's name, prefixed by kind and unit: `key:<id>:requests`, `agent:<id>:tokens`. */
  readonly id: string;
  readonly limits: RateLimits;
  /** Units to take: 1 for a request, the reservation for tokens, 0 to read the balance. */
  readonly cost: number;
}

/** A bucket's state after a decision: what the `x-ratelimit-*` headers carry. */
export interface BucketState {
  /** The bucket's capacity. */
  readonly limit: number;
  /** Whole units left (never negative). */
  readonly remaining: number;
  /** Milliseconds until the bucket is full again. */
  readonly resetMs: number;
}

export type LimitDecision =
  | { readonly ok: true; readonly states: readonly BucketState[] }
  | {
      readonly ok: false;
      /** Whole seconds, at least 1: when every refused bucket will have room. */
      readonly retryAfterSeconds: number;
      readonly states: readonly BucketState[];
    };

export interface Limiter {
  /**
   * Takes every bucket's cost, or none: when one bucket lacks room, nothing
   * is taken anywhere. `states` are in the order of `takes`.
   */
  take(takes: readonly BucketTake[]): Promise<LimitDecision>;
  /**
   * Settles a reservation after the fact: `delta` units more (positive) or
   * given back (negative). Best effort: a failure is the limiter's to log.
   */
  settle(id: string, limits: RateLimits, delta: number): Promise<void>;
}
