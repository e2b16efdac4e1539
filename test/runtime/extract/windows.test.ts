import { describe, expect, it } from "vitest";
import { splitWindows } from "../../../runtime/extract/windows.js";

describe("overlapping windows over a long token sequence", () => {
  it("is one window when the sequence fits", () => {
    expect(splitWindows(510, 510, 128)).toEqual([{ start: 0, end: 510, ownStart: 0, ownEnd: 510 }]);
  });

  it.each([
    [511, 510, 128],
    [1200, 510, 128],
    [5000, 510, 128],
    [37, 8, 4],
    [100, 10, 0],
  ])(
    "owns every token of %i (capacity %i, overlap %i) exactly once, with context both sides",
    (length, capacity, overlap) => {
      const windows = splitWindows(length, capacity, overlap);
      const owners = new Array<number>(length).fill(0);
      for (const w of windows) {
        expect(w.end - w.start).toBeLessThanOrEqual(capacity);
        expect(w.start).toBeLessThanOrEqual(w.ownStart);
        expect(w.ownEnd).toBeLessThanOrEqual(w.end);
        for (let t = w.ownStart; t < w.ownEnd; t++) owners[t]! += 1;
      }
      expect(owners.every((n) => n === 1)).toBe(true);
      expect(windows.at(-1)!.end).toBe(length);
      // Between two windows, each owned token has half the overlap of context on the far side.
      for (let k = 0; k + 1 < windows.length; k++) {
        expect(windows[k]!.end - windows[k]!.ownEnd).toBeGreaterThanOrEqual(
          Math.floor(overlap / 2),
        );
        expect(windows[k + 1]!.ownStart - windows[k + 1]!.start).toBeGreaterThanOrEqual(
          Math.floor(overlap / 2),
        );
      }
    },
  );
});
