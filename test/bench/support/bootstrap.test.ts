import { describe, expect, it } from "vitest";
import { median } from "../runtime/stats.js";
import { bootstrapInterval } from "./bootstrap.js";

const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;

describe("bootstrapInterval", () => {
  it("is a point when every round holds the same value", () => {
    const rounds = Array.from({ length: 50 }, () => [3, 3, 3]);
    const [low, high] = bootstrapInterval(rounds.length, (drawn) =>
      median(drawn.flatMap((i) => rounds[i]!)),
    );
    expect(low).toBe(3);
    expect(high).toBe(3);
  });

  it("gives a mean's interval the width the central limit theorem does", () => {
    // 1..400: mean 200.5, standard deviation 115.5, so the mean of 400 draws
    // has a standard error of 5.77 and a 95% interval about 22.6 wide.
    const values = Array.from({ length: 400 }, (_, i) => i + 1);
    const [low, high] = bootstrapInterval(values.length, (drawn) =>
      mean(drawn.map((i) => values[i]!)),
    );
    expect(low).toBeLessThan(200.5);
    expect(high).toBeGreaterThan(200.5);
    expect(high - low).toBeGreaterThan(22.6 * 0.85);
    expect(high - low).toBeLessThan(22.6 * 1.15);
  });

  it("draws whole rounds, as many as there are, each index within them", () => {
    const seen: number[][] = [];
    bootstrapInterval(
      7,
      (drawn) => {
        seen.push([...drawn]);
        return 0;
      },
      { resamples: 100 },
    );
    expect(seen).toHaveLength(100);
    for (const drawn of seen) {
      expect(drawn).toHaveLength(7);
      for (const i of drawn) expect(Number.isInteger(i) && i >= 0 && i < 7).toBe(true);
    }
    // With repeats: some resample left a round out.
    expect(seen.some((drawn) => new Set(drawn).size < 7)).toBe(true);
  });

  it("narrows as rounds are added, and repeats itself for a seed", () => {
    const width = (n: number) => {
      const values = Array.from({ length: n }, (_, i) => (i * 37) % 101);
      const [low, high] = bootstrapInterval(n, (drawn) => median(drawn.map((i) => values[i]!)));
      return high - low;
    };
    expect(width(1600)).toBeLessThan(width(100) / 2);
    const values = Array.from({ length: 60 }, (_, i) => Math.sin(i) * 10);
    const statistic = (drawn: readonly number[]) => median(drawn.map((i) => values[i]!));
    expect(bootstrapInterval(60, statistic)).toEqual(bootstrapInterval(60, statistic));
    expect(bootstrapInterval(60, statistic, { seed: 1 })).not.toEqual(
      bootstrapInterval(60, statistic, { seed: 2 }),
    );
  });

  it("has no interval without rounds", () => {
    expect(bootstrapInterval(0, () => 1)).toEqual([Number.NaN, Number.NaN]);
  });
});
