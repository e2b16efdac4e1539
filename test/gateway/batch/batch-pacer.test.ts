import { describe, expect, it } from "vitest";
import { BatchPacer, leaseSize } from "../../../gateway/batch/batch-pacer.js";

describe("BatchPacer", () => {
  it("starts at its maximum and halves on each answer that saw interactive requests waiting, down to one", () => {
    const pacer = new BatchPacer(32);
    expect(pacer.limit).toBe(32);
    pacer.observe(3);
    expect(pacer.limit).toBe(16);
    for (let i = 0; i < 10; i++) pacer.observe(2);
    expect(pacer.limit).toBe(1);
  });

  it("grows by one per quiet answer, up to its maximum", () => {
    const pacer = new BatchPacer(4);
    pacer.observe(2);
    pacer.observe(2);
    expect(pacer.limit).toBe(1);
    pacer.observe(0);
    expect(pacer.limit).toBe(2);
    for (let i = 0; i < 10; i++) pacer.observe(0);
    expect(pacer.limit).toBe(4);
  });

  it("beside interactive traffic the runtime keeps up with, keeps one line going at a steady pace", () => {
    const pacer = new BatchPacer(32);
    pacer.observe(1);
    expect([pacer.limit, pacer.spacingMs]).toEqual([16, 5]);
    for (let i = 0; i < 10; i++) pacer.observe(1);
    expect([pacer.limit, pacer.spacingMs]).toEqual([1, 5]);
    for (let i = 0; i < 10; i++) pacer.observe(2);
    expect([pacer.limit, pacer.spacingMs]).toEqual([1, 100]);
    // Waiting interactive requests gone, the stream still there: back to the steady pace.
    pacer.observe(1);
    expect([pacer.limit, pacer.spacingMs]).toEqual([1, 5]);
    pacer.observe(0);
    expect([pacer.limit, pacer.spacingMs]).toEqual([2, 0]);
  });

  it("spaces lines out while interactive requests keep waiting at one line in flight, and stops spacing once they do not", () => {
    const pacer = new BatchPacer(2);
    pacer.observe(2);
    expect([pacer.limit, pacer.spacingMs]).toEqual([1, 0]);
    pacer.observe(2);
    expect(pacer.spacingMs).toBe(5);
    pacer.observe(3);
    expect(pacer.spacingMs).toBe(10);
    for (let i = 0; i < 10; i++) pacer.observe(2);
    expect(pacer.spacingMs).toBe(100);
    pacer.observe(1);
    expect([pacer.limit, pacer.spacingMs]).toEqual([1, 5]);
    pacer.observe(0);
    expect([pacer.limit, pacer.spacingMs]).toEqual([2, 0]);
  });

  it("keeps the steady pace it was given beside a stream, and still backs off from it when requests wait", () => {
    const pacer = new BatchPacer(4, { shareSpacingMs: 20 });
    for (let i = 0; i < 3; i++) pacer.observe(1);
    expect([pacer.limit, pacer.spacingMs]).toEqual([1, 20]);
    pacer.observe(2);
    expect(pacer.spacingMs).toBe(40);
    pacer.observe(1);
    expect(pacer.spacingMs).toBe(20);
    pacer.observe(0);
    expect([pacer.limit, pacer.spacingMs]).toEqual([2, 0]);
  });

  it("refuses a maximum below one", () => {
    expect(() => new BatchPacer(0)).toThrow();
  });
});

describe("leaseSize", () => {
  const leaseMs = 60_000;

  it("leases two steps' worth ahead at full speed", () => {
    expect(leaseSize({ limit: 32, spacingMs: 0, lineMs: 15, leaseMs })).toBe(64);
    expect(leaseSize({ limit: 4, spacingMs: 0, lineMs: 20_000, leaseMs })).toBe(8);
  });

  it("paced down to one quick line at a time, leases what a quarter of the lease runs, up to 64", () => {
    // One line every 7 ms: 142 a second, 2,142 in 15 s.
    expect(leaseSize({ limit: 1, spacingMs: 5, lineMs: 2, leaseMs })).toBe(64);
    // One every 2.5 s: 6 in 15 s.
    expect(leaseSize({ limit: 1, spacingMs: 100, lineMs: 2_400, leaseMs })).toBe(8);
    // One every 500 ms: 30 in 15 s, which still run within the lease if the pace halves.
    expect(leaseSize({ limit: 1, spacingMs: 100, lineMs: 400, leaseMs })).toBe(30);
  });

  it("a short lease keeps the lines leased ahead few", () => {
    expect(leaseSize({ limit: 1, spacingMs: 5, lineMs: 2, leaseMs: 200 })).toBe(8);
  });
});
