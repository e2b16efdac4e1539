import type { RateLimits } from "./limits.js";

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

/**
 * Token-bucket arithmetic, with the clock passed in on every call so that the
 * math is deterministic and tests need no fake timers. Times are
 * milliseconds (any monotonic-enough origin; `Date.now()` or
 * `performance.now()` both work as long as one is used consistently).
 *
 * The bucket stores the token count as of `updatedAt` and refills lazily on
 * each call: no timers, O(1) per request.
 */
export class TokenBucket {
  private tokens: number;
  private updatedAt: number;
  private limitsValue: RateLimits;

  constructor(limits: RateLimits, now: number) {
    this.limitsValue = limits;
    // A new identity starts with a full bucket: its first burst is allowed.
    this.tokens = limits.burst;
    this.updatedAt = now;
  }

  get limits(): RateLimits {
    return this.limitsValue;
  }

  /** Tokens available at `now`, without taking any. */
  available(now: number): number {
    this.refill(now);
    return this.tokens;
  }

  /**
   * Takes `cost` tokens if they are there. When they are not, nothing is
   * taken and the answer says how long until they will be: whole seconds,
   * rounded up and at least 1, because that is what `Retry-After` carries and
   * a client that retries exactly then must succeed.
   */
  take(now: number, cost = 1): TakeResult {
    this.refill(now);
    if (this.tokens >= cost) {
      this.tokens -= cost;
      return { ok: true };
    }
    // A cost above the burst can never be paid; the wait reported is the time
    // to a full bucket, which is the best a client can do.
    const missing = Math.min(cost, this.limitsValue.burst) - this.tokens;
    return { ok: false, retryAfterSeconds: retryAfterSeconds(missing, this.limitsValue) };
  }

  /**
   * Settles a reservation after the fact: a positive `delta` takes more
   * (the request used more than it reserved; the balance may go below zero,
   * a debt later requests wait out), a negative one gives back what was not
   * used, never above the burst.
   */
  settle(now: number, delta: number): void {
    this.refill(now);
    this.tokens = Math.min(this.limitsValue.burst, this.tokens - delta);
  }

  /** Milliseconds until the bucket is full again: the `x-ratelimit-reset-*` header. */
  msToFull(now: number): number {
    const missing = this.limitsValue.burst - this.available(now);
    return missing <= 0 ? 0 : Math.ceil(missing / (this.limitsValue.requestsPerMinute / 60_000));
  }

  /**
   * True when the bucket has refilled completely: it is then the same as a
   * fresh one, so forgetting it changes no decision. The limiter evicts such
   * buckets to bound its memory.
   */
  isFull(now: number): boolean {
    return this.available(now) >= this.limitsValue.burst;
  }

  /**
   * Applies new limits (a keys-file reload) without handing out a fresh
   * burst: the current balance is kept, capped at the new burst.
   */
  setLimits(limits: RateLimits, now: number): void {
    this.refill(now);
    this.limitsValue = limits;
    this.tokens = Math.min(this.tokens, limits.burst);
  }

  private refill(now: number): void {
    // A clock that steps backwards (NTP) must not drain or overfill: treat it
    // as no time passed and keep the later timestamp.
    const elapsed = now - this.updatedAt;
    if (elapsed <= 0) return;
    const perMs = this.limitsValue.requestsPerMinute / 60_000;
    this.tokens = Math.min(this.limitsValue.burst, this.tokens + elapsed * perMs);
    this.updatedAt = now;
  }
}

/** Seconds until `missing` tokens have refilled: ceil, and never below 1. */
export function retryAfterSeconds(missing: number, limits: RateLimits): number {
  const perSecond = limits.requestsPerMinute / 60;
  // The epsilon absorbs float noise such as 1.0000000000000002 seconds, which
  // would otherwise round a wait of exactly 1 s up to 2 s.
  const seconds = Math.ceil(missing / perSecond - 1e-9);
  return Math.max(1, seconds);
}
