import { describe, expect, it } from "vitest";
import {
  hasRoom,
  preemptionVictims,
  type Room,
  type RunningRow,
} from "../../../runtime/generation/preemption.js";

const batch = (admittedOrder: number, reserved = 10): RunningRow => ({
  batch: true,
  admittedOrder,
  reserved,
});
const interactive = (admittedOrder: number, reserved = 10): RunningRow => ({
  batch: false,
  admittedOrder,
  reserved,
});

/** Rows of the batch, and positions across them (each counted as reserved: no padding). */
const room = (maxRows: number, maxTotal = Infinity): Room => ({
  maxRows,
  fits: (r) => r.length <= maxRows && r.reduce((a, b) => a + b, 0) <= maxTotal,
});

describe("which batch sequences make way for an interactive one", () => {
  it("preempts nothing when the newcomer fits", () => {
    expect(preemptionVictims([batch(0)], 10, room(2))).toEqual([]);
    expect(preemptionVictims([], 10, room(1))).toEqual([]);
  });

  it("takes the youngest batch row when every place is full", () => {
    expect(preemptionVictims([batch(3), batch(7), batch(5)], 10, room(3))).toEqual([1]);
  });

  it("never takes an interactive row, however young", () => {
    expect(preemptionVictims([batch(1), interactive(9)], 10, room(2))).toEqual([0]);
  });

  it("returns null, preempting nothing, when only interactive rows hold the places", () => {
    expect(preemptionVictims([interactive(0), interactive(1)], 10, room(2))).toBeNull();
  });

  it("takes as many of the youngest batch rows as the cache budget needs, and no more", () => {
    const rows = [batch(0, 30), batch(1, 30), batch(2, 30), interactive(3, 10)];
    // 100 positions: the newcomer's 40 needs two 30-position rows gone (100 - 60 + 40 = 80).
    expect(preemptionVictims(rows, 40, room(8, 100))?.sort()).toEqual([1, 2]);
  });

  it("returns null when even every batch row leaving would not make room", () => {
    const rows = [batch(0, 30), interactive(1, 60)];
    expect(preemptionVictims(rows, 50, room(8, 100))).toBeNull();
  });

  it("a lone newcomer always has room: the token limit bounds it", () => {
    expect(hasRoom([], 10_000, room(1, 10))).toBe(true);
  });
});
