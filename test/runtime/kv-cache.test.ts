import { describe, expect, it } from "vitest";
import { alignRows } from "../../runtime/generation/kv-cache.js";

/** A [rows, heads, length, dim] tensor whose value encodes (row, head, position, d). */
function tensor(rows: number, heads: number, length: number, dim: number, filled: number[]) {
  const data = new Float32Array(rows * heads * length * dim);
  for (let r = 0; r < rows; r++)
    for (let h = 0; h < heads; h++)
      for (let p = length - filled[r]!; p < length; p++)
        for (let d = 0; d < dim; d++)
          data[((r * heads + h) * length + p) * dim + d] = 1000 * r + 100 * h + 10 * p + d + 1;
  return data;
}

function at(
  data: Float32Array,
  heads: number,
  length: number,
  dim: number,
  r: number,
  h: number,
  p: number,
  d: number,
) {
  return data[((r * heads + h) * length + p) * dim + d];
}

describe("alignRows", () => {
  const shape = { heads: 2, headDim: 3 };

  it("right-aligns rows of different lengths and zeroes the padding", () => {
    const a = tensor(1, 2, 4, 3, [4]);
    const b = tensor(2, 2, 6, 3, [6, 2]);
    const out = alignRows(
      [
        { data: a, row: 0, length: 4, filled: 4 },
        { data: b, row: 1, length: 6, filled: 2 },
      ],
      shape,
      5,
    );
    expect(out.length).toBe(2 * 2 * 5 * 3);
    // Row 0: a's 4 positions land at 1..4; position 0 is padding.
    expect(at(out, 2, 5, 3, 0, 1, 0, 2)).toBe(0);
    expect(at(out, 2, 5, 3, 0, 1, 1, 2)).toBe(at(a, 2, 4, 3, 0, 1, 0, 2));
    expect(at(out, 2, 5, 3, 0, 0, 4, 0)).toBe(at(a, 2, 4, 3, 0, 0, 3, 0));
    // Row 1: b's row 1 has its 2 real positions at 4..5 of 6; they land at 3..4 of 5.
    expect(at(out, 2, 5, 3, 1, 1, 3, 1)).toBe(at(b, 2, 6, 3, 1, 1, 4, 1));
    expect(at(out, 2, 5, 3, 1, 1, 4, 1)).toBe(at(b, 2, 6, 3, 1, 1, 5, 1));
    expect(at(out, 2, 5, 3, 1, 0, 2, 0)).toBe(0);
  });

  it("compacts a batch by dropping rows and leading padding", () => {
    const batch = tensor(3, 2, 7, 3, [7, 3, 2]);
    const out = alignRows(
      [
        { data: batch, row: 1, length: 7, filled: 3 },
        { data: batch, row: 2, length: 7, filled: 2 },
      ],
      shape,
      3,
    );
    expect(at(out, 2, 3, 3, 0, 0, 0, 0)).toBe(at(batch, 2, 7, 3, 1, 0, 4, 0));
    expect(at(out, 2, 3, 3, 1, 1, 2, 2)).toBe(at(batch, 2, 7, 3, 2, 1, 6, 2));
    expect(at(out, 2, 3, 3, 1, 1, 0, 2)).toBe(0);
  });

  it("refuses a target shorter than a row", () => {
    const a = tensor(1, 2, 4, 3, [4]);
    expect(() => alignRows([{ data: a, row: 0, length: 4, filled: 4 }], shape, 3)).toThrow(
      /does not fit/,
    );
  });
});
