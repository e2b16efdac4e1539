import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../api/input-items.js";
import { turnsOf } from "../../runtime/generation/turns.js";

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
