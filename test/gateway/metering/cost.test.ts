import { describe, expect, it } from "vitest";
import { costOf } from "../../../gateway/metering/cost.js";

describe("costOf", () => {
  it.each([
    // input tokens, output tokens, input price, output price per million, cost
    [1000, 2000, "0.50", "1.50", "0.0035"],
    [1_000_000, 0, "3", "15", "3"],
    [0, 1_000_000, "3", "15", "15"],
    [1, 1, "0.15", "0.6", "0.00000075"],
    [0, 0, "2.5", "10", "0"],
    [12_345, 678, "0", "0", "0"],
    [7, 3, "0.000125", "10", "0.000030000875"],
    [2 ** 31 - 1, 2 ** 31 - 1, "99999.999999", "99999.999999", "429496729.395705032706"],
  ])("%i in + %i out at %s / %s per million = %s", (input, output, inPrice, outPrice, cost) => {
    expect(
      costOf(
        { inputTokens: input, outputTokens: output },
        { inputPerMillionTokens: inPrice, outputPerMillionTokens: outPrice },
      ),
    ).toBe(cost);
  });

  it("refuses a price that is not a decimal", () => {
    expect(() =>
      costOf(
        { inputTokens: 1, outputTokens: 1 },
        { inputPerMillionTokens: "1e-6", outputPerMillionTokens: "0" },
      ),
    ).toThrow(/not a price/);
  });
});
