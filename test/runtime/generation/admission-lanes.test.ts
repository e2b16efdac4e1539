import { describe, expect, it } from "vitest";
import { AdmissionQueue } from "../../../runtime/engine/admission-queue.js";

/** What the decode scheduler reads from the admission queue to preempt: the head's lane, each admitted request's lane. */
describe("the admission queue's lanes, as the decode scheduler reads them", () => {
  it("peekPriority names the lane of the request peek shows: interactive before batch, whenever it arrived", () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 4 });
    expect(queue.peekPriority()).toBeUndefined();
    void queue.submit("b1", undefined, "batch");
    expect([queue.peek(), queue.peekPriority()]).toEqual(["b1", "batch"]);
    void queue.submit("i1");
    expect([queue.peek(), queue.peekPriority()]).toEqual(["i1", "interactive"]);
    queue.take(1);
    expect([queue.peek(), queue.peekPriority()]).toEqual(["b1", "batch"]);
    queue.take(1);
    expect(queue.peekPriority()).toBeUndefined();
  });

  it("an admitted request carries the lane it waited in", () => {
    const queue = new AdmissionQueue<string, string>({ maxQueue: 4 });
    void queue.submit("b", undefined, "batch");
    void queue.submit("i", undefined, "interactive");
    const admitted = queue.take(2);
    expect(admitted.map((a) => [a.job, a.priority])).toEqual([
      ["i", "interactive"],
      ["b", "batch"],
    ]);
    for (const a of admitted) a.resolve(a.job);
  });
});
