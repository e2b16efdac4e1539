import { describe, expect, it } from "vitest";
import { isCodedError } from "../../lib/coded-error.js";
import { Batcher } from "../../runtime/engine/batcher.js";

function recorder(delayMs = 0) {
  const batches: number[][] = [];
  let running = 0;
  let peak = 0;
  const run = async (items: number[]) => {
    running++;
    peak = Math.max(peak, running);
    batches.push(items);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    running--;
    return items.map((i) => i * 10);
  };
  return { batches, run, peak: () => peak };
}

describe("Batcher", () => {
  it("gathers requests that arrive within the window into one run", async () => {
    const r = recorder();
    const batcher = new Batcher({
      maxBatchSize: 8,
      maxWaitMs: 20,
      maxQueue: 100,
      concurrency: 1,
      run: r.run,
    });
    const results = await Promise.all([1, 2, 3].map((i) => batcher.submit(i)));
    expect(results).toEqual([10, 20, 30]);
    expect(r.batches).toEqual([[1, 2, 3]]);
  });

  it("runs a full batch without waiting out the window", async () => {
    const r = recorder();
    const batcher = new Batcher({
      maxBatchSize: 2,
      maxWaitMs: 60_000,
      maxQueue: 100,
      concurrency: 1,
      run: r.run,
    });
    const results = await Promise.all([1, 2].map((i) => batcher.submit(i)));
    expect(results).toEqual([10, 20]);
  });

  it("never exceeds the batch size or the concurrency", async () => {
    const r = recorder(5);
    const batcher = new Batcher({
      maxBatchSize: 3,
      maxWaitMs: 1,
      maxQueue: 100,
      concurrency: 2,
      run: r.run,
    });
    const items = Array.from({ length: 20 }, (_, i) => i);
    const results = await Promise.all(items.map((i) => batcher.submit(i)));
    expect(results).toEqual(items.map((i) => i * 10));
    expect(Math.max(...r.batches.map((b) => b.length))).toBeLessThanOrEqual(3);
    expect(r.peak()).toBe(2);
    expect(r.batches.flat().sort((a, b) => a - b)).toEqual(items);
  });

  it("answers 429 with Retry-After when the queue is full, and loses no accepted request", async () => {
    const r = recorder(20);
    const batcher = new Batcher({
      maxBatchSize: 1,
      maxWaitMs: 0,
      maxQueue: 2,
      concurrency: 1,
      run: r.run,
    });
    const outcomes = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => batcher.submit(i)));
    const rejected = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
    // One runs at once, two wait; the other two are refused.
    expect(rejected).toHaveLength(2);
    for (const o of rejected) {
      const error: unknown = o.reason;
      expect(isCodedError(error) && error.statusCode).toBe(429);
      expect(isCodedError(error) && error.retryAfterSeconds).toBeGreaterThan(0);
    }
    expect(
      outcomes
        .filter((o): o is PromiseFulfilledResult<number> => o.status === "fulfilled")
        .map((o) => o.value),
    ).toEqual([10, 20, 30]);
  });

  it("drops a waiting request whose caller went away", async () => {
    const r = recorder(20);
    const batcher = new Batcher({
      maxBatchSize: 1,
      maxWaitMs: 0,
      maxQueue: 10,
      concurrency: 1,
      run: r.run,
    });
    const controller = new AbortController();
    const first = batcher.submit(1);
    const second = batcher.submit(2, controller.signal);
    controller.abort(new Error("gone"));
    await expect(second).rejects.toThrow("gone");
    await first;
    expect(r.batches).toEqual([[1]]);
  });

  it("passes a failed run's error to every request of the batch", async () => {
    const batcher = new Batcher<number, number>({
      maxBatchSize: 4,
      maxWaitMs: 5,
      maxQueue: 10,
      concurrency: 1,
      run: () => Promise.reject(new Error("model crashed")),
    });
    const outcomes = await Promise.allSettled([1, 2].map((i) => batcher.submit(i)));
    expect(outcomes.every((o) => o.status === "rejected")).toBe(true);
  });
});
