import { DEFAULT_RATE_LIMITS, sameLimits, type RateLimits } from "./limits.js";
import type { BucketState, BucketTake, LimitDecision, Limiter } from "./limiter.js";
import { retryAfterSeconds, TokenBucket, type TakeResult } from "./token-bucket.js";

export interface RateLimiterOptions {
  /** Limits for an identity that has no override. */
  defaults?: RateLimits;
  /**
   * Most buckets held at once. Past it, the least recently used bucket is
   * dropped even if it is not full, which hands that identity a fresh burst:
   * the price of bounded memory under an identity flood.
   */
  maxBuckets?: number;
  /** Milliseconds; injected so tests and the app share one clock. */
  now?: () => number;
}

export const DEFAULT_MAX_BUCKETS = 100_000;

/**
 * How many least-recently-used buckets each call looks at for eviction. Two
 * per call outpaces the one bucket a call can create, so idle buckets drain
 * without a timer and without a full scan on the request path.
 */
const SWEEP_PER_CALL = 2;

/**
 * Token buckets per identity. The identity is an opaque string chosen by the
 * caller; prefix it by kind (`key:<id>`, `agent:<id>`) so that an API key and
 * a payment agent never share a bucket.
 *
 * The map is kept in least-recently-used order (a used bucket is re-inserted
 * at the end), so the oldest entries are the ones most likely to be full and
 * forgettable.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly defaults: RateLimits;
  private readonly maxBuckets: number;
  private readonly now: () => number;

  constructor(options: RateLimiterOptions = {}) {
    this.defaults = options.defaults ?? DEFAULT_RATE_LIMITS;
    this.maxBuckets = Math.max(1, options.maxBuckets ?? DEFAULT_MAX_BUCKETS);
    this.now = options.now ?? Date.now;
  }

  /**
   * Takes `cost` from the identity's bucket. `limits` is the identity's
   * override (for an API key, its `rateLimit` from the keys file); when it
   * differs from what the bucket was built with (a reload changed it), the
   * bucket adopts it and keeps its balance.
   */
  check(identity: string, limits?: RateLimits, cost = 1): TakeResult {
    const now = this.now();
    const result = this.bucketOf(identity, limits ?? this.defaults, now).take(now, cost);
    this.sweep(now);
    return result;
  }

  /**
   * Every bucket's cost, or none (see `Limiter.take`): the balances are
   * read first, and taken only when all of them have room.
   */
  takeAll(takes: readonly BucketTake[]): LimitDecision {
    const now = this.now();
    const buckets = takes.map((take) => this.bucketOf(take.id, take.limits, now));
    let waitSeconds = 0;
    buckets.forEach((bucket, i) => {
      const { cost, limits } = takes[i]!;
      const missing = Math.min(cost, limits.burst) - bucket.available(now);
      if (bucket.available(now) < cost) {
        waitSeconds = Math.max(waitSeconds, retryAfterSeconds(missing, limits));
      }
    });
    const ok = waitSeconds === 0;
    if (ok) buckets.forEach((bucket, i) => bucket.take(now, takes[i]!.cost));
    const states = buckets.map((bucket): BucketState => ({
      limit: bucket.limits.burst,
      remaining: Math.max(0, Math.floor(bucket.available(now))),
      resetMs: bucket.msToFull(now),
    }));
    this.sweep(now);
    return ok ? { ok, states } : { ok, retryAfterSeconds: waitSeconds, states };
  }

  /** Settles a reservation (see `Limiter.settle`). */
  settle(identity: string, limits: RateLimits, delta: number): void {
    const now = this.now();
    this.bucketOf(identity, limits, now).settle(now, delta);
  }

  /** One request from the identity's bucket: `check` with cost 1. */
  take(identity: string, limits?: RateLimits): TakeResult {
    return this.check(identity, limits, 1);
  }

  /** Buckets held now; for tests and a gauge. */
  get size(): number {
    return this.buckets.size;
  }

  /** Forgets every bucket whose balance is back to full. */
  evictIdle(): number {
    const now = this.now();
    let evicted = 0;
    for (const [identity, bucket] of this.buckets) {
      if (bucket.isFull(now)) {
        this.buckets.delete(identity);
        evicted += 1;
      }
    }
    return evicted;
  }

  /** The identity's bucket, made most recently used, with `limits` applied. */
  private bucketOf(identity: string, wanted: RateLimits, now: number): TokenBucket {
    let bucket = this.buckets.get(identity);
    if (bucket) {
      this.buckets.delete(identity);
      if (!sameLimits(bucket.limits, wanted)) bucket.setLimits(wanted, now);
    } else {
      bucket = new TokenBucket(wanted, now);
    }
    this.buckets.set(identity, bucket);
    return bucket;
  }

  private sweep(now: number): void {
    while (this.buckets.size > this.maxBuckets) {
      const oldest = this.buckets.keys().next();
      if (oldest.done) break;
      this.buckets.delete(oldest.value);
    }
    let looked = 0;
    for (const [identity, bucket] of this.buckets) {
      if (looked >= SWEEP_PER_CALL) break;
      looked += 1;
      if (bucket.isFull(now)) this.buckets.delete(identity);
    }
  }
}

/** The limiter of one replica without Valkey: this process's buckets, behind the shared interface. */
export class InProcessLimiter implements Limiter {
  constructor(readonly buckets: RateLimiter = new RateLimiter()) {}

  take(takes: readonly BucketTake[]): Promise<LimitDecision> {
    return Promise.resolve(this.buckets.takeAll(takes));
  }

  settle(id: string, limits: RateLimits, delta: number): Promise<void> {
    this.buckets.settle(id, limits, delta);
    return Promise.resolve();
  }
}
