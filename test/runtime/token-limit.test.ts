import { describe, expect, it } from "vitest";
import { decideTokenLimit, type TokenLimitInput } from "../../runtime/token-limit.js";

const base: TokenLimitInput = {
  inputTokens: 10,
  maxTokens: 100,
  policy: "truncate",
  truncation: "auto",
  reserve: 0,
};

describe("decideTokenLimit", () => {
  it.each<[Partial<TokenLimitInput>, ReturnType<typeof decideTokenLimit>]>([
    [{}, { kind: "fits" }],
    [{ inputTokens: 100 }, { kind: "fits" }],
    [{ inputTokens: 101 }, { kind: "truncate", budget: 100 }],
    [
      { inputTokens: 90, reserve: 20 },
      { kind: "truncate", budget: 80 },
    ],
    [{ inputTokens: 80, reserve: 20 }, { kind: "fits" }],
    // Output room takes at most half the limit from the input.
    [{ inputTokens: 5, reserve: 500 }, { kind: "fits" }],
    [{ inputTokens: 50, reserve: 500 }, { kind: "fits" }],
    [
      { inputTokens: 51, reserve: 500 },
      { kind: "truncate", budget: 50 },
    ],
    [
      { inputTokens: 52, reserve: 50, maxTokens: 101 },
      { kind: "truncate", budget: 51 },
    ],
    [
      { inputTokens: 101, policy: "error" },
      { kind: "reject", limit: 100 },
    ],
    [{ inputTokens: 100, policy: "error" }, { kind: "fits" }],
    // The error policy checks the input alone: output room is not the caller's fault.
    [{ inputTokens: 90, reserve: 20, policy: "error" }, { kind: "fits" }],
    [
      { inputTokens: 101, truncation: "disabled" },
      { kind: "reject", limit: 100 },
    ],
    [{ inputTokens: 99, truncation: "disabled" }, { kind: "fits" }],
  ])("%j → %j", (input, decision) => {
    expect(decideTokenLimit({ ...base, ...input })).toEqual(decision);
  });
});
