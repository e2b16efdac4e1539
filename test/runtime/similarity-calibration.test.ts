import { describe, expect, it } from "vitest";
import {
  DEFAULT_CALIBRATION,
  calibrate,
  poolRow,
} from "../../runtime/classify/similarity-classifier.js";
import { parseServeConfig } from "../../runtime/config.js";

describe("similarity calibration", () => {
  it("maps the midpoint to 0.5, keeps order, and stays within [0, 1]", () => {
    expect(calibrate(DEFAULT_CALIBRATION.midpoint, DEFAULT_CALIBRATION)).toBeCloseTo(0.5, 10);
    const scores = [-1, 0, 0.1, 0.2, 0.4, 1].map((c) => calibrate(c, DEFAULT_CALIBRATION));
    expect([...scores].sort((a, b) => a - b)).toEqual(scores);
    for (const s of scores) expect(s).toBeGreaterThanOrEqual(0);
    for (const s of scores) expect(s).toBeLessThanOrEqual(1);
    expect(calibrate(0.3, { midpoint: 0.1, steepness: 20 })).toBeCloseTo(
      1 / (1 + Math.exp(-4)),
      10,
    );
  });

  it("is configurable from flags and MODELGATE_* variables", () => {
    const config = parseServeConfig(
      { modelPath: "/m", similarityMidpoint: "0.15" },
      { MODELGATE_SIMILARITY_STEEPNESS: "12" },
    );
    expect(config).toMatchObject({ similarityMidpoint: 0.15, similaritySteepness: 12 });
    expect(() => parseServeConfig({ modelPath: "/m", similaritySteepness: "-1" }, {})).toThrow(
      /similaritySteepness \(--similarity-steepness/,
    );
  });

  it("mean-pools over the mask only and normalises", () => {
    // Two positions of a 2-wide hidden state; the second is padding.
    const pooled = poolRow(
      Float32Array.from([3, 4, 100, 100]),
      BigInt64Array.from([1n, 0n]),
      2,
      2,
      "mean",
    );
    expect(Array.from(pooled)).toEqual([expect.closeTo(0.6, 6), expect.closeTo(0.8, 6)]);
  });
});
