import { describe, expect, it } from "vitest";
import { SharedKvCache } from "../../runtime/generation/shared-kv-cache.js";

const HEADS = 2;
const DIM = 3;
const NAMES = ["past.0.key", "past.0.value"];

/** A prefill's present [1, heads, length, dim] whose values encode (tag, head, position, d). */
function present(tag: number, length: number): Float32Array {
  const data = new Float32Array(HEADS * length * DIM);
  for (let h = 0; h < HEADS; h++)
    for (let p = 0; p < length; p++)
      for (let d = 0; d < DIM; d++) data[(h * length + p) * DIM + d] = tag + 100 * h + 10 * p + d;
  return data;
}

/** Row r, head h, positions [0, length) of a cache buffer, flattened. */
function row(cache: SharedKvCache, name: string, r: number, h: number, length: number): number[] {
  const at = (r * HEADS + h) * cache.capacity * DIM;
  return [...cache.view(name).subarray(at, at + length * DIM)];
}

function expectRow(cache: SharedKvCache, r: number, tag: number, length: number) {
  for (const name of NAMES)
    for (let h = 0; h < HEADS; h++)
      expect(row(cache, name, r, h, length)).toEqual(
        [...present(tag, length)].slice(h * length * DIM, (h + 1) * length * DIM),
      );
}

function cache(chunk = 4, maxTotalTokens = 1000, maxRows = 8) {
  return new SharedKvCache(
    { names: NAMES, kvHeads: HEADS, headDim: DIM },
    { maxRows, chunk, maxSequenceTokens: 100, maxTotalTokens },
  );
}

describe("SharedKvCache", () => {
  it("holds each row left-aligned, with room for the next position, capacity in chunks", () => {
    const c = cache();
    c.add(5, () => present(1000, 5));
    c.add(2, () => present(2000, 2));
    expect(c.rows).toBe(2);
    expect(c.capacity).toBe(8);
    expect(c.lengths).toEqual([5, 2]);
    expectRow(c, 0, 1000, 5);
    expectRow(c, 1, 2000, 2);
    // Past a row's length the buffer is zero: the graph writes the next position there.
    expect(row(c, NAMES[0]!, 1, 0, 8).slice(2 * DIM)).toEqual(new Array(6 * DIM).fill(0));
    // The graph sees the batch's rows only.
    expect(c.view(NAMES[0]!).length).toBe(2 * HEADS * 8 * DIM);
  });

  it("copies one row out compact, as the prefix cache keeps it", () => {
    const c = cache();
    c.add(5, () => present(1000, 5));
    c.add(2, () => present(2000, 2));
    for (const name of NAMES) {
      expect([...c.copyRow(0, name)]).toEqual([...present(1000, 5)]);
      expect([...c.copyRow(1, name)]).toEqual([...present(2000, 2)]);
    }
    expect(() => c.copyRow(2, NAMES[0]!)).toThrow(/no row/);
  });

  it("grows by a chunk only when a row would not fit its next position, keeping every row", () => {
    const c = cache();
    c.add(3, () => present(1000, 3));
    expect(c.capacity).toBe(4);
    const before = c.view(NAMES[0]!).buffer;
    c.reserveStep();
    expect(c.view(NAMES[0]!).buffer).toBe(before);
    c.advance();
    c.reserveStep();
    expect(c.capacity).toBe(8);
    expect(c.lengths).toEqual([4]);
    expectRow(c, 0, 1000, 3);
  });

  it("adds a row in place while the buffers have room, doubling the room otherwise", () => {
    const c = cache();
    c.add(3, () => present(1000, 3));
    c.add(2, () => present(2000, 2));
    const two = c.view(NAMES[0]!).buffer;
    c.add(1, () => present(3000, 1));
    const four = c.view(NAMES[0]!).buffer;
    expect(four).not.toBe(two);
    expect(four.byteLength).toBe(4 * HEADS * c.capacity * DIM * 4);
    c.add(1, () => present(4000, 1));
    expect(c.view(NAMES[0]!).buffer).toBe(four);
    expectRow(c, 0, 1000, 3);
    expectRow(c, 1, 2000, 2);
    expectRow(c, 3, 4000, 1);
  });

  it("fills a finished row's place with a last row and shrinks to what is left", () => {
    const c = cache();
    c.add(9, () => present(1000, 9));
    c.add(2, () => present(2000, 2));
    c.add(3, () => present(3000, 3));
    c.add(1, () => present(4000, 1));
    expect(c.capacity).toBe(12);
    // Rows 0 and 2 finish: row 3 moves into hole 0, row 1 stays.
    expect(c.remove([0, 2])).toEqual([3, 1]);
    expect(c.lengths).toEqual([1, 2]);
    expect(c.capacity).toBe(4);
    expectRow(c, 0, 4000, 1);
    expectRow(c, 1, 2000, 2);
    expect(c.remove([0, 1])).toEqual([]);
    expect(c.rows).toBe(0);
    expect(c.stepValues).toBe(0);
  });

  it("masks each row's positions plus the fed ones over the whole capacity", () => {
    const c = cache();
    c.add(2, () => present(1000, 2));
    c.add(5, () => present(2000, 5));
    expect([...c.mask()]).toEqual([1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0].map(BigInt));
  });

  it("admits rows only while their padded reservations fit the budget", () => {
    const c = cache(4, 32, 4);
    expect(c.fits([7])).toBe(true);
    // Four rows padded to the longest (7 + 1 -> 8 positions) fill 32 exactly; a fifth does not fit.
    expect(c.fits([7, 1, 1, 1])).toBe(true);
    expect(c.fits([7, 1, 1, 1, 1])).toBe(false);
    // More rows than the buffers hold do not fit either.
    expect(cache(4, 1000, 4).fits([1, 1, 1, 1, 1])).toBe(false);
    // Past the per-sequence limit nothing fits.
    expect(c.fits([101])).toBe(false);
  });

  it("refuses a present of the wrong size", () => {
    const c = cache();
    expect(() => c.add(4, () => present(1000, 3))).toThrow(/holds/);
  });
});
