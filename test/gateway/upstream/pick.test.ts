import { describe, expect, it } from "vitest";
import { PREFERRED_LOAD_MARGIN, pickEndpoint } from "../../../gateway/upstream/pick.js";

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

  describe("with a preferred endpoint (the conversation's previous replica)", () => {
    const loads = (a: number, b: number, c: number) =>
      new Map([
        ["a", a],
        ["b", b],
        ["c", c],
      ]);
    const prefer = (endpoint: string, margin = 2) => ({ endpoint, margin });

    it("takes it while its load is within the margin of the least loaded", () => {
      expect(pickEndpoint(endpoints, loads(2, 0, 1), new Set(), 0, prefer("a"))).toBe("a");
      expect(pickEndpoint(endpoints, loads(0, 0, 0), new Set(), 1, prefer("c"))).toBe("c");
      // Margin zero: only when it is as idle as the least loaded.
      expect(pickEndpoint(endpoints, loads(1, 0, 1), new Set(), 0, prefer("a", 0))).toBe("b");
      expect(pickEndpoint(endpoints, loads(0, 0, 1), new Set(), 1, prefer("a", 0))).toBe("a");
    });

    it("goes to the least loaded when it is overloaded, gone (not ready) or already tried", () => {
      expect(pickEndpoint(endpoints, loads(3, 0, 1), new Set(), 0, prefer("a"))).toBe("b");
      expect(pickEndpoint(endpoints, loads(0, 1, 2), new Set(), 0, prefer("z"))).toBe("a");
      expect(pickEndpoint(endpoints, loads(0, 1, 2), new Set(["a"]), 0, prefer("a"))).toBe("b");
      expect(
        pickEndpoint(endpoints, new Map(), new Set(endpoints), 0, prefer("a")),
      ).toBeUndefined();
    });

    it("has a default margin of a few requests", () => {
      expect(PREFERRED_LOAD_MARGIN).toBeGreaterThan(0);
      const margin = PREFERRED_LOAD_MARGIN;
      const at = loads(margin, 0, 0);
      expect(pickEndpoint(endpoints, at, new Set(), 1, prefer("a", margin))).toBe("a");
      const past = loads(margin + 1, 0, 0);
      expect(pickEndpoint(endpoints, past, new Set(), 1, prefer("a", margin))).toBe("b");
    });
  });
});
