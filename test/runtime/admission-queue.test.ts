import { describe, expect, it } from "vitest";
import { isCodedError } from "../../lib/coded-error.js";
import { AdmissionQueue, type QueueLoad } from "../../runtime/engine/admission-queue.js";

function codeOf(error: unknown): string | undefined {
  return isCodedError(error) ? error.code : undefined;
}

/** Settles to "pending" when the promise has not settled by the next macrotask. */
async function stateOf(promise: Promise<unknown>): Promise<string> {
  const pending = new Promise((resolve) => setImmediate(() => resolve("pending")));
  return Promise.race([
    promise.then(
      () => "resolved",
      () => "rejected",
    ),
    pending,
  ]) as Promise<string>;
}

describe("AdmissionQueue", () => {
  it("is bounded: past maxQueue waiting requests it answers 429 rate_limit_exceeded with Retry-After", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 2 });
    const waiting = [queue.submit("a"), queue.submit("b")];
    const refused = await queue.submit("c").catch((error: unknown) => error);
    expect(codeOf(refused)).toBe("rate_limit_exceeded");
    expect(isCodedError(refused) && refused.statusCode).toBe(429);
    expect(isCodedError(refused) && refused.retryAfterSeconds).toBe(1);
    expect(queue.depth).toBe(2);
    // What was accepted is not lost.
    for (const admitted of queue.take(10)) admitted.resolve(admitted.job.toUpperCase());
    expect(await Promise.all(waiting)).toEqual(["A", "B"]);
  });

  it("hands requests to its executor oldest first", () => {
    const queue = new AdmissionQueue<number, number>({ maxQueue: 10 });
    for (const i of [1, 2, 3, 4, 5]) void queue.submit(i);
    expect(queue.take(2).map((a) => a.job)).toEqual([1, 2]);
    expect(queue.take(10).map((a) => a.job)).toEqual([3, 4, 5]);
    expect(queue.take(1)).toEqual([]);
  });

  it("takes interactive requests before batch ones, whenever they arrived", () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 10 });
    void queue.submit("b1", undefined, "batch");
    void queue.submit("b2", undefined, "batch");
    void queue.submit("i1");
    expect(queue.depth).toBe(3);
    expect(queue.peek()).toBe("i1");
    expect(queue.take(2).map((a) => a.job)).toEqual(["i1", "b1"]);
    void queue.submit("i2");
    void queue.submit("b3", undefined, "batch");
    expect(queue.take(10).map((a) => a.job)).toEqual(["i2", "b2", "b3"]);
  });

  it("bounds each lane on its own: waiting batch work never makes an interactive request overflow", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 2 });
    void queue.submit("b1", undefined, "batch");
    void queue.submit("b2", undefined, "batch");
    const refused = await queue.submit("b3", undefined, "batch").catch((e: unknown) => e);
    expect(codeOf(refused)).toBe("rate_limit_exceeded");
    const interactive = queue.submit("i1");
    expect(await stateOf(interactive)).toBe("pending");
    expect(queue.take(1).map((a) => a.job)).toEqual(["i1"]);
  });

  it("drops a batch request whose caller went away from the batch lane", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 2 });
    const controller = new AbortController();
    const gone = queue.submit("gone", controller.signal, "batch");
    controller.abort();
    await expect(gone).rejects.toSatisfy((e) => codeOf(e) === "client_closed_request");
    expect(queue.depth).toBe(0);
  });

  it("drops a request whose caller went away while it waited: at once, as 499, freeing its place", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 2 });
    const controller = new AbortController();
    void queue.submit("first");
    const gone = queue.submit("gone", controller.signal);
    await expect(queue.submit("refused")).rejects.toSatisfy(
      (e) => codeOf(e) === "rate_limit_exceeded",
    );

    controller.abort(new Error("client closed the connection"));
    // Synchronously out of the queue, not at the executor's next look.
    expect(queue.depth).toBe(1);
    const reason = await gone.catch((error: unknown) => error);
    expect(codeOf(reason)).toBe("client_closed_request");
    expect(isCodedError(reason) && reason.statusCode).toBe(499);
    expect((reason as Error).cause).toEqual(new Error("client closed the connection"));

    void queue.submit("later");
    expect(queue.take(10).map((a) => a.job)).toEqual(["first", "later"]);
  });

  it("refuses a request whose caller is already gone without queueing it", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 2 });
    let woken = 0;
    queue.attach(() => woken++);
    await expect(queue.submit("x", AbortSignal.abort())).rejects.toSatisfy(
      (e) => codeOf(e) === "client_closed_request",
    );
    expect(queue.depth).toBe(0);
    expect(woken).toBe(0);
  });

  it("leaves an admitted request to its executor: a later abort does not reject it", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 2 });
    const controller = new AbortController();
    const answer = queue.submit("x", controller.signal);
    const [admitted] = queue.take(1);
    controller.abort();
    expect(admitted?.signal?.aborted).toBe(true);
    expect(await stateOf(answer)).toBe("pending");
    admitted?.resolve("stopped early");
    expect(await answer).toBe("stopped early");
  });

  it("counts a request in flight from admission until it settles, once", async () => {
    const loads: QueueLoad[] = [];
    const queue = new AdmissionQueue<number, number>({
      maxQueue: 4,
      onLoad: (load) => loads.push(load),
    });
    const answers = [queue.submit(1), queue.submit(2)];
    expect([queue.depth, queue.inFlight]).toEqual([2, 0]);
    const [a, b] = queue.take(2);
    expect([queue.depth, queue.inFlight]).toEqual([0, 2]);
    a?.resolve(10);
    a?.resolve(11);
    a?.reject(new Error("late"));
    expect(queue.inFlight).toBe(1);
    b?.reject(new Error("model crashed"));
    expect(queue.inFlight).toBe(0);
    expect(await answers[0]).toBe(10);
    await expect(answers[1]).rejects.toThrow("model crashed");
    expect(loads).toEqual([
      { waiting: 1, inFlight: 0 },
      { waiting: 2, inFlight: 0 },
      { waiting: 0, inFlight: 2 },
      { waiting: 0, inFlight: 1 },
      { waiting: 0, inFlight: 0 },
    ]);
  });

  it("reports how long each admitted request waited", () => {
    let now = 1000;
    const waits: number[] = [];
    const queue = new AdmissionQueue<string, string>({
      maxQueue: 4,
      now: () => now,
      onAdmit: (seconds) => waits.push(seconds),
    });
    void queue.submit("a");
    now += 250;
    void queue.submit("b");
    now += 500;
    queue.take(2);
    expect(waits).toEqual([0.75, 0.5]);
  });

  it("wakes its one executor on every arrival, and has only one", () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 4 });
    let woken = 0;
    queue.attach(() => woken++);
    void queue.submit("a");
    void queue.submit("b");
    expect(woken).toBe(2);
    expect(() => queue.attach(() => undefined)).toThrow(/exactly one executor/);
  });

  it("once closed, answers 503 model_not_ready, and what already waits still goes to the model", async () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 4 });
    const waiting = queue.submit("a");
    queue.close();
    await expect(queue.submit("b")).rejects.toSatisfy((e) => codeOf(e) === "model_not_ready");
    const [admitted] = queue.take(1);
    admitted?.resolve("done");
    expect(await waiting).toBe("done");
  });

  it("while interactive traffic is recent, gives batch requests a quarter of a step; once quiet, whole steps", () => {
    let now = 0;
    const queue = new AdmissionQueue<string, string>({ maxQueue: 100, now: () => now });
    for (let i = 0; i < 40; i++) void queue.submit(`b${i}`, undefined, "batch");
    // No interactive request yet: batch work fills the whole step.
    expect(queue.take(32)).toHaveLength(32);
    void queue.submit("i1");
    now = 10;
    const step = queue.take(32).map((a) => a.job);
    expect(step).toEqual(["i1", "b32", "b33", "b34", "b35", "b36", "b37", "b38", "b39"]);
    for (let i = 40; i < 80; i++) void queue.submit(`b${i}`, undefined, "batch");
    // Still within 250 ms of i1: a step without interactive requests is short too.
    now = 240;
    expect(queue.take(32)).toHaveLength(8);
    // 250 ms after the last interactive arrival, batch work fills whole steps again.
    now = 260;
    expect(queue.take(32)).toHaveLength(32);
  });

  it("counts interactive requests waiting or admitted as its interactive load, batch ones not", () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 10 });
    void queue.submit("b1", undefined, "batch");
    void queue.submit("i1");
    void queue.submit("i2");
    expect(queue.interactiveLoad).toBe(2);
    const [first, ...rest] = queue.take(2);
    expect(first!.job).toBe("i1");
    expect(queue.interactiveLoad).toBe(2);
    first!.resolve("done");
    expect(queue.interactiveLoad).toBe(1);
    for (const admitted of rest) admitted.resolve("done");
    expect(queue.interactiveLoad).toBe(0);
    const [batch] = queue.take(1);
    expect(batch!.job).toBe("b1");
    expect(queue.interactiveLoad).toBe(0);
  });

  it("reports interactive pressure while interactive traffic is recent, even with none waiting", () => {
    let now = 0;
    const queue = new AdmissionQueue<string, string>({ maxQueue: 10, now: () => now });
    expect(queue.interactivePressure).toBe(0);
    void queue.submit("i1");
    void queue.submit("i2");
    // Two waiting: back off.
    expect(queue.interactivePressure).toBe(3);
    const admitted = queue.take(2);
    // Running, none waiting: the runtime keeps up.
    expect(queue.interactivePressure).toBe(1);
    now = 1000;
    expect(queue.interactivePressure).toBe(1);
    for (const entry of admitted) entry.resolve("done");
    expect(queue.interactivePressure).toBe(0);
    void queue.submit("i3");
    for (const entry of queue.take(1)) entry.resolve("done");
    now = 1249;
    expect(queue.interactivePressure).toBe(1);
    now = 1250;
    expect(queue.interactivePressure).toBe(0);
  });

  it("holds batch requests for company while interactive traffic is about and none waits", () => {
    let now = 0;
    const queue = new AdmissionQueue<string, string>({ maxQueue: 10, now: () => now });
    void queue.submit("b1", undefined, "batch");
    // No interactive traffic: batch work takes the model at once.
    expect(queue.batchHoldMs(10)).toBe(0);
    void queue.submit("i1");
    // An interactive request waits: the step is due now, the batch request rides in it.
    expect(queue.batchHoldMs(10)).toBe(0);
    expect(queue.take(8).map((a) => a.job)).toEqual(["i1", "b1"]);
    now = 3;
    void queue.submit("b2", undefined, "batch");
    expect(queue.batchHoldMs(10)).toBe(10);
    now = 9;
    expect(queue.batchHoldMs(10)).toBe(4);
    now = 13;
    expect(queue.batchHoldMs(10)).toBe(0);
    // Interactive traffic gone quiet (250 ms): nothing to wait for.
    void queue.submit("b3", undefined, "batch");
    queue.take(8);
    now = 300;
    void queue.submit("b4", undefined, "batch");
    expect(queue.batchHoldMs(10)).toBe(0);
  });

  it("reports each admission's wait with its lane", () => {
    let now = 0;
    const waits: Array<[number, string]> = [];
    const queue = new AdmissionQueue<string, string>({
      maxQueue: 10,
      now: () => now,
      onAdmit: (seconds, priority) => waits.push([seconds, priority]),
    });
    void queue.submit("b", undefined, "batch");
    now = 2;
    void queue.submit("i");
    now = 5;
    queue.take(8);
    expect(waits).toEqual([
      [0.003, "interactive"],
      [0.005, "batch"],
    ]);
  });
});
