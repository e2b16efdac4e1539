import { describe, expect, it } from "vitest";
import { TokenBucket, retryAfterSeconds } from "../../../gateway/rate-limit/token-bucket.js";

const limits = { requestsPerMinute: 60, burst: 3 }; // 1 token per second

describe("TokenBucket", () => {
  it("starts full: the first burst passes, the next request is refused", () => {
    const bucket = new TokenBucket(limits, 0);
    expect([1, 2, 3].map(() => bucket.take(0).ok)).toEqual([true, true, true]);
    expect(bucket.take(0)).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it("refills at requestsPerMinute / 60 tokens a second, capped at the burst", () => {
    const bucket = new TokenBucket(limits, 0);
    for (let i = 0; i < 3; i += 1) bucket.take(0);
    expect(bucket.available(500)).toBeCloseTo(0.5);
    expect(bucket.take(500)).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(bucket.take(1_000)).toEqual({ ok: true });
    expect(bucket.available(3_600_000)).toBe(3);
  });

  it("Retry-After is the wait until the request can pass, rounded up, at least 1", () => {
    const slow = { requestsPerMinute: 6, burst: 1 }; // one token per 10 s
    const bucket = new TokenBucket(slow, 0);
    expect(bucket.take(0).ok).toBe(true);
    expect(bucket.take(0)).toEqual({ ok: false, retryAfterSeconds: 10 });
    expect(bucket.take(2_500)).toEqual({ ok: false, retryAfterSeconds: 8 }); // 7.5 s left
    expect(bucket.take(9_999)).toEqual({ ok: false, retryAfterSeconds: 1 });
    // A client that waits exactly Retry-After succeeds.
    expect(bucket.take(10_000)).toEqual({ ok: true });
  });

  it("a refused take costs nothing", () => {
    const bucket = new TokenBucket({ requestsPerMinute: 60, burst: 1 }, 0);
    bucket.take(0);
    for (let i = 0; i < 5; i += 1) bucket.take(100);
    expect(bucket.take(1_000).ok).toBe(true);
  });

  it("takes a cost above 1, and reports the full-bucket wait for a cost above the burst", () => {
    const bucket = new TokenBucket(limits, 0);
    expect(bucket.take(0, 2)).toEqual({ ok: true });
    expect(bucket.take(0, 2)).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(bucket.take(0, 10)).toEqual({ ok: false, retryAfterSeconds: 2 });
  });

  it("a clock stepping backwards neither refills nor drains", () => {
    const bucket = new TokenBucket({ requestsPerMinute: 60, burst: 2 }, 10_000);
    bucket.take(10_000);
    expect(bucket.available(5_000)).toBe(1);
    expect(bucket.available(10_500)).toBeCloseTo(1.5);
  });

  it("new limits keep the balance, capped at the new burst", () => {
    const bucket = new TokenBucket({ requestsPerMinute: 60, burst: 10 }, 0);
    bucket.take(0, 4);
    bucket.setLimits({ requestsPerMinute: 60, burst: 3 }, 0);
    expect(bucket.available(0)).toBe(3);
    bucket.setLimits({ requestsPerMinute: 60, burst: 100 }, 0);
    expect(bucket.available(0)).toBe(3);
  });

  it("retryAfterSeconds absorbs float noise at whole seconds", () => {
    expect(retryAfterSeconds(1, { requestsPerMinute: 60, burst: 1 })).toBe(1);
    expect(retryAfterSeconds(0.1 * 3, { requestsPerMinute: 18, burst: 1 })).toBe(1);
    expect(retryAfterSeconds(0.0001, { requestsPerMinute: 60, burst: 1 })).toBe(1);
    expect(retryAfterSeconds(1.5, { requestsPerMinute: 60, burst: 1 })).toBe(2);
  });
});
