import { describe, expect, it } from "vitest";
import { randomHex } from "../../lib/random-hex.js";

describe("randomHex", () => {
  it("gives 2 hex digits per byte", () => {
    expect(randomHex(16)).toMatch(/^[0-9a-f]{32}$/);
    expect(randomHex(1)).toMatch(/^[0-9a-f]{2}$/);
  });

  it("never repeats across many pool refills", () => {
    // 2,000 ids of 24 bytes draw 48 KB: about a dozen refills of the pool.
    const ids = Array.from({ length: 2_000 }, () => randomHex(24));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("spreads its digits evenly, as random bytes do", () => {
    const text = Array.from({ length: 500 }, () => randomHex(32)).join("");
    const counts = new Map<string, number>();
    for (const digit of text) counts.set(digit, (counts.get(digit) ?? 0) + 1);
    expect(counts.size).toBe(16);
    // 32,000 digits: 2,000 expected each; a 5-sigma band is about ±220.
    for (const count of counts.values()) expect(Math.abs(count - 2_000)).toBeLessThan(250);
  });

  it("refuses more bytes than its pool holds", () => {
    expect(() => randomHex(4097)).toThrow(RangeError);
  });
});
