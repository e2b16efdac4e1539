import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../api/input-items.js";
import { keepNewest, turnsOf } from "../../runtime/generation/turns.js";

const m = (role: ChatMessage["role"], content: string): ChatMessage => ({ role, content });

describe("turnsOf (the unit truncation drops)", () => {
  it("cuts after each answer: a turn is its input messages and the assistant messages after them", () => {
    const system = m("system", "be brief");
    const conversation = [
      system,
      m("user", "q1"),
      m("assistant", "a1"),
      m("developer", "d2"),
      m("user", "q2"),
      m("assistant", "a2a"),
      m("assistant", "a2b"),
      m("user", "q3"),
    ];
    expect(turnsOf(conversation)).toEqual([
      [system, m("user", "q1"), m("assistant", "a1")],
      [m("developer", "d2"), m("user", "q2"), m("assistant", "a2a"), m("assistant", "a2b")],
      [m("user", "q3")],
    ]);
  });

  it("keeps a conversation without answers, or ending with one, as it is", () => {
    expect(turnsOf([m("user", "a"), m("user", "b")])).toEqual([[m("user", "a"), m("user", "b")]]);
    expect(turnsOf([m("user", "a"), m("assistant", "b")])).toEqual([
      [m("user", "a"), m("assistant", "b")],
    ]);
    expect(turnsOf([m("assistant", "a"), m("user", "b")])).toEqual([
      [m("assistant", "a")],
      [m("user", "b")],
    ]);
    expect(turnsOf([])).toEqual([]);
  });
});

describe("keepNewest (what truncation keeps)", () => {
  /** The rule as it reads: drop the oldest while more than one is left and they do not fit. */
  function dropOneByOne<T>(items: readonly T[], fits: (kept: readonly T[]) => boolean): T[] {
    let kept = [...items];
    while (kept.length > 1 && !fits(kept)) kept = kept.slice(1);
    return kept;
  }

  it("keeps what dropping one at a time keeps, for every budget", () => {
    const sizes = [5, 1, 9, 3, 3, 7, 2, 8, 4, 6];
    const total = (kept: readonly number[]) => kept.reduce((a, b) => a + b, 0);
    for (let budget = 0; budget <= total(sizes) + 1; budget++) {
      const fits = (kept: readonly number[]) => total(kept) <= budget;
      expect(keepNewest(sizes, fits)).toEqual(dropOneByOne(sizes, fits));
    }
    expect(keepNewest([], () => false)).toEqual([]);
  });

  it("renders a long conversation a logarithmic number of times, not once per message", () => {
    const messages = Array.from({ length: 3_000 }, (_, i) => i);
    let renders = 0;
    const kept = keepNewest(messages, (k) => {
      renders++;
      return k.length <= 10;
    });
    expect(kept).toEqual(messages.slice(-10));
    // Dropping one at a time rendered it 2,991 times.
    expect(renders).toBeLessThanOrEqual(Math.ceil(Math.log2(messages.length)) + 1);
  });
});
