import { describe, expect, it } from "vitest";
import { BatchPacer } from "../../../gateway/batch/batch-pacer.js";

describe("BatchPacer", () => {
  it("starts at its maximum and halves on each answer that saw interactive work, down to one", () => {
    const pacer = new BatchPacer(32);
    expect(pacer.limit).toBe(32);
    pacer.observe(3);
    expect(pacer.limit).toBe(16);
    for (let i = 0; i < 10; i++) pacer.observe(1);
    expect(pacer.limit).toBe(1);
  });

  it("grows by one per quiet answer, up to its maximum", () => {
    const pacer = new BatchPacer(4);
    pacer.observe(1);
    pacer.observe(1);
    expect(pacer.limit).toBe(1);
    pacer.observe(0);
    expect(pacer.limit).toBe(2);
    for (let i = 0; i < 10; i++) pacer.observe(0);
    expect(pacer.limit).toBe(4);
  });

  it("refuses a maximum below one", () => {
    expect(() => new BatchPacer(0)).toThrow();
  });
});
