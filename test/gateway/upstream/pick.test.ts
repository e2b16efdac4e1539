import { describe, expect, it } from "vitest";
import { pickEndpoint } from "../../../gateway/upstream/pick.js";

describe("pickEndpoint", () => {
  const endpoints = ["a", "b", "c"];

  it("picks the endpoint with the fewest requests in flight", () => {
    expect(
      pickEndpoint(
        endpoints,
        new Map([
          ["a", 3],
          ["b", 1],
          ["c", 2],
        ]),
        new Set(),
        0,
      ),
    ).toBe("b");
  });

  it("shares ties round-robin by turn", () => {
    const idle = new Map<string, number>();
    expect([0, 1, 2, 3].map((turn) => pickEndpoint(endpoints, idle, new Set(), turn))).toEqual([
      "a",
      "b",
      "c",
      "a",
    ]);
  });

  it("skips endpoints already tried, and gives up when all were", () => {
    expect(pickEndpoint(endpoints, new Map(), new Set(["a", "b"]), 0)).toBe("c");
    expect(pickEndpoint(endpoints, new Map(), new Set(endpoints), 0)).toBeUndefined();
    expect(pickEndpoint([], new Map(), new Set(), 0)).toBeUndefined();
  });
});
