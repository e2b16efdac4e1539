import { describe, expect, it } from "vitest";
import { WorkQueue } from "../../../operator/controller/work-queue.js";

describe("WorkQueue", () => {
  it("queues a key once however often it is added", async () => {
    const q = new WorkQueue();
    q.add("a");
    q.add("b");
    q.add("a");
    expect(q.depth).toBe(2);
    expect(await q.get()).toBe("a");
    expect(await q.get()).toBe("b");
  });

  it("never hands a key being processed to a second worker, and requeues it when added meanwhile", async () => {
    const q = new WorkQueue();
    q.add("a");
    const key = await q.get();
    q.add("a");
    expect(q.depth).toBe(0);
    q.done(key!);
    expect(q.depth).toBe(1);
    expect(await q.get()).toBe("a");
  });

  it("wakes a waiting worker when a key arrives", async () => {
    const q = new WorkQueue();
    const pending = q.get();
    q.add("x");
    expect(await pending).toBe("x");
  });

  it("backs off exponentially per key and forgets after a success", () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 70 });
    expect([1, 2, 3, 4, 5].map(() => q.addRateLimited("k"))).toEqual([10, 20, 40, 70, 70]);
    expect(q.addRateLimited("other")).toBe(10);
    q.forget("k");
    expect(q.failuresOf("k")).toBe(0);
    expect(q.addRateLimited("k")).toBe(10);
    q.shutDown();
  });

  it("adds a delayed key after its delay, keeping the sooner of two due times", async () => {
    const q = new WorkQueue();
    q.addAfter("k", 10_000);
    q.addAfter("k", 20);
    q.addAfter("k", 5_000);
    const started = Date.now();
    expect(await q.get()).toBe("k");
    expect(Date.now() - started).toBeLessThan(1_000);
    q.shutDown();
  });

  it("releases waiting workers on shutdown", async () => {
    const q = new WorkQueue();
    const pending = q.get();
    q.shutDown();
    expect(await pending).toBeUndefined();
    q.add("late");
    expect(q.depth).toBe(0);
  });
});
