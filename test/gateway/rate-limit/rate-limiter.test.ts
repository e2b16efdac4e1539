import { describe, expect, it } from "vitest";
import { RateLimiter } from "../../../gateway/rate-limit/rate-limiter.js";

function clock(start = 0): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe("RateLimiter", () => {
  it("keeps one bucket per identity, with the defaults when there is no override", () => {
    const c = clock();
    const limiter = new RateLimiter({ defaults: { requestsPerMinute: 60, burst: 2 }, now: c.now });
    expect(limiter.check("key:a").ok).toBe(true);
    expect(limiter.check("key:a").ok).toBe(true);
    expect(limiter.check("key:a")).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(limiter.check("key:b").ok).toBe(true);
    expect(limiter.check("agent:a").ok).toBe(true);
  });

  it("applies a per-identity override, and a changed override on the next call", () => {
    const c = clock();
    const limiter = new RateLimiter({ defaults: { requestsPerMinute: 60, burst: 1 }, now: c.now });
    const generous = { requestsPerMinute: 600, burst: 5 };
    for (let i = 0; i < 5; i += 1) expect(limiter.check("key:vip", generous).ok).toBe(true);
    expect(limiter.check("key:vip", generous)).toEqual({ ok: false, retryAfterSeconds: 1 });
    c.advance(100); // one token at 10/s
    expect(limiter.check("key:vip", generous).ok).toBe(true);
    // A reload lowers the limit: no fresh burst is handed out.
    expect(limiter.check("key:vip", { requestsPerMinute: 6, burst: 1 })).toEqual({
      ok: false,
      retryAfterSeconds: 10,
    });
  });

  it("forgets buckets that have refilled, so idle identities cost no memory", () => {
    const c = clock();
    const limiter = new RateLimiter({ defaults: { requestsPerMinute: 60, burst: 2 }, now: c.now });
    for (let i = 0; i < 100; i += 1) limiter.check(`key:${i}`);
    expect(limiter.size).toBe(100);
    c.advance(1_000); // every bucket is full again
    // Each call looks at the two least recently used buckets: 50 calls clear 100.
    for (let i = 0; i < 50; i += 1) limiter.check("key:busy");
    expect(limiter.size).toBe(1);
    // A full sweep, for a periodic timer.
    for (let i = 0; i < 10; i += 1) limiter.check(`key:${i}`);
    c.advance(2_000);
    expect(limiter.evictIdle()).toBe(11);
    expect(limiter.size).toBe(0);
  });

  it("never holds more than maxBuckets, dropping the least recently used", () => {
    const c = clock();
    const limiter = new RateLimiter({
      defaults: { requestsPerMinute: 1, burst: 5 },
      maxBuckets: 10,
      now: c.now,
    });
    for (let i = 0; i < 50; i += 1) limiter.check(`key:${i}`);
    expect(limiter.size).toBe(10);
  });

  it("is fast enough for the request path", () => {
    const limiter = new RateLimiter();
    const start = performance.now();
    for (let i = 0; i < 200_000; i += 1) limiter.check(`key:${i % 1000}`);
    expect(performance.now() - start).toBeLessThan(2_000);
  });
});
