import { describe, expect, it } from "vitest";
import { isCodedError } from "../../lib/coded-error.js";
import { AdmissionQueue, type Queued } from "../../runtime/engine/admission-queue.js";
import { BatchExecutor, type BatchExecutorOptions } from "../../runtime/engine/batch-executor.js";

/** A run function that records each batch it gets and answers item × 10. */
function recorder(delayMs = 0) {
  const batches: number[][] = [];
  let running = 0;
  let peak = 0;
  const run = async (batch: readonly Queued<number>[]) => {
    running++;
    peak = Math.max(peak, running);
    batches.push(batch.map((q) => q.job));
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    running--;
    return batch.map((q) => q.job * 10);
  };
  return { batches, run, peak: () => peak };
}

function executor(
  options: Omit<BatchExecutorOptions<number, number>, "run"> & { maxQueue?: number },
  run: BatchExecutorOptions<number, number>["run"],
) {
  const queue = new AdmissionQueue<number, number>({ maxQueue: options.maxQueue ?? 100 });
  new BatchExecutor(queue, { ...options, run });
  return queue;
}

describe("BatchExecutor, fed by the admission queue", () => {
  it("gathers requests that arrive within the window into one run", async () => {
    const r = recorder();
    const queue = executor({ maxBatchSize: 8, maxWaitMs: 20, concurrency: 1 }, r.run);
    const results = await Promise.all([1, 2, 3].map((i) => queue.submit(i)));
    expect(results).toEqual([10, 20, 30]);
    expect(r.batches).toEqual([[1, 2, 3]]);
  });

  it("runs a full batch without waiting out the window", async () => {
    const r = recorder();
    const queue = executor({ maxBatchSize: 2, maxWaitMs: 60_000, concurrency: 1 }, r.run);
    const results = await Promise.all([1, 2].map((i) => queue.submit(i)));
    expect(results).toEqual([10, 20]);
  });

  it("never exceeds the batch size or the concurrency, and keeps arrival order", async () => {
    const r = recorder(5);
    const queue = executor({ maxBatchSize: 3, maxWaitMs: 1, concurrency: 2 }, r.run);
    const items = Array.from({ length: 20 }, (_, i) => i);
    const results = await Promise.all(items.map((i) => queue.submit(i)));
    expect(results).toEqual(items.map((i) => i * 10));
    expect(Math.max(...r.batches.map((b) => b.length))).toBeLessThanOrEqual(3);
    expect(r.peak()).toBe(2);
    // Batches leave the queue oldest first.
    expect(r.batches.flat()).toEqual(items);
  });

  it("answers 429 with Retry-After when the queue is full, and loses no accepted request", async () => {
    const r = recorder(20);
    const queue = executor({ maxBatchSize: 1, maxWaitMs: 0, concurrency: 1, maxQueue: 2 }, r.run);
    const outcomes = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => queue.submit(i)));
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

  it("never runs a request whose caller went away while it waited for the model", async () => {
    const r = recorder(20);
    const queue = executor({ maxBatchSize: 1, maxWaitMs: 0, concurrency: 1 }, r.run);
    const controller = new AbortController();
    const first = queue.submit(1);
    const second = queue.submit(2, controller.signal);
    const third = queue.submit(3);
    controller.abort(new Error("gone"));
    await expect(second).rejects.toSatisfy((e) => isCodedError(e) && e.statusCode === 499);
    expect(await Promise.all([first, third])).toEqual([10, 30]);
    expect(r.batches).toEqual([[1], [3]]);
  });

  it("never runs a request whose caller went away while its batch window was open", async () => {
    const r = recorder();
    const queue = executor({ maxBatchSize: 8, maxWaitMs: 20, concurrency: 1 }, r.run);
    const controller = new AbortController();
    const kept = [queue.submit(1), queue.submit(3)];
    const gone = queue.submit(2, controller.signal);
    controller.abort();
    await expect(gone).rejects.toSatisfy((e) => isCodedError(e) && e.statusCode === 499);
    expect(await Promise.all(kept)).toEqual([10, 30]);
    expect(r.batches).toEqual([[1, 3]]);
  });

  it("passes a failed run's error to every request of the batch, and keeps serving", async () => {
    let fail = true;
    const queue = executor({ maxBatchSize: 4, maxWaitMs: 5, concurrency: 1 }, (batch) =>
      fail ? Promise.reject(new Error("model crashed")) : Promise.resolve(batch.map((q) => q.job)),
    );
    const outcomes = await Promise.allSettled([1, 2].map((i) => queue.submit(i)));
    expect(outcomes.every((o) => o.status === "rejected")).toBe(true);
    expect(queue.inFlight).toBe(0);
    fail = false;
    expect(await queue.submit(7)).toBe(7);
  });

  it("fails a batch whose run returns the wrong number of results instead of leaving it hanging", async () => {
    const queue = executor({ maxBatchSize: 2, maxWaitMs: 5, concurrency: 1 }, () =>
      Promise.resolve([1]),
    );
    const outcomes = await Promise.allSettled([1, 2].map((i) => queue.submit(i)));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);
  });

  it("while interactive traffic is about, lets a batch request ride in the next interactive step rather than run alone", async () => {
    const r = recorder(2);
    const queue = executor(
      { maxBatchSize: 8, maxWaitMs: 0, concurrency: 1, batchHoldMs: 200 },
      r.run,
    );
    await queue.submit(1);
    const started = performance.now();
    const batchAnswer = queue.submit(100, undefined, "batch");
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Held: nothing ran for it yet.
    expect(r.batches).toEqual([[1]]);
    await queue.submit(2);
    expect(await batchAnswer).toBe(1000);
    expect(r.batches).toEqual([[1], [2, 100]]);
    expect(performance.now() - started).toBeLessThan(200);
  });

  it("runs a held batch request alone once its hold is over", async () => {
    const r = recorder();
    const queue = executor(
      { maxBatchSize: 8, maxWaitMs: 0, concurrency: 1, batchHoldMs: 30 },
      r.run,
    );
    await queue.submit(1);
    const started = performance.now();
    expect(await queue.submit(100, undefined, "batch")).toBe(1000);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(r.batches).toEqual([[1], [100]]);
  });

  it("never holds batch work when no interactive traffic is about", async () => {
    const r = recorder();
    const queue = executor(
      { maxBatchSize: 8, maxWaitMs: 0, concurrency: 1, batchHoldMs: 60_000 },
      r.run,
    );
    expect(await queue.submit(100, undefined, "batch")).toBe(1000);
  });
});
