import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../../api/input-items.js";
import { continuedBody } from "../../../gateway/routes/conversation.js";

/**
 * The forwarded body of a continuation (gateway/routes/conversation.ts): the
 * stored turns before the caller's input, within the body limit, leaving out
 * the oldest whole turns where truncation allows and refusing otherwise.
 */
const raw = Buffer.from(JSON.stringify({ model: "m", input: "Next?", truncation: "auto" }));
const turn = (n: number, bytes: number): ChatMessage[] => [
  { role: "user", content: `question ${n} ${"é".repeat(bytes)}` },
  { role: "assistant", content: `answer ${n}` },
];
const turns = [turn(1, 300), turn(2, 10), turn(3, 200), turn(4, 5)];
const all = { canDrop: true, olderUnread: false };

/** The messages forwarded, by their text's first two words. */
function sent(body: Buffer): string[] {
  const input = (JSON.parse(body.toString("utf8")) as { input: { content: string }[] }).input;
  return input.map((m) => m.content.split(" ").slice(0, 2).join(" "));
}

function fitted(limitBytes: number, options = all) {
  const answer = continuedBody(raw, turns, { limitBytes, ...options });
  if (answer.kind !== "fits") throw new Error(`expected a body, got ${JSON.stringify(answer)}`);
  return answer;
}

describe("a continuation's forwarded body", () => {
  const whole = fitted(1 << 20);
  const alone = continuedBody(raw, [], { limitBytes: 1 << 20, ...all });
  const aloneBytes = alone.kind === "fits" ? alone.body.length : 0;

  it("carries every turn, oldest first, then the input, while the whole fits", () => {
    expect(whole.droppedTurns).toBe(0);
    expect(sent(whole.body)).toEqual([
      ...["question 1", "answer 1", "question 2", "answer 2"],
      ...["question 3", "answer 3", "question 4", "answer 4", "Next?"],
    ]);
    // Exactly at the limit is within it.
    expect(fitted(whole.body.length).droppedTurns).toBe(0);
  });

  it("leaves out the oldest whole turns, as few as it must, when it may", () => {
    const over = fitted(whole.body.length - 1);
    expect(over.droppedTurns).toBe(1);
    expect(sent(over.body)[0]).toBe("question 2");
    // Each limit keeps the most newest turns whose body fits: sizes are exact.
    for (let limit = aloneBytes; limit < whole.body.length; limit += 7) {
      const answer = fitted(limit);
      expect(answer.body.length).toBeLessThanOrEqual(limit);
      if (answer.droppedTurns > 0) {
        const oneMore = continuedBody(raw, turns.slice(answer.droppedTurns - 1), {
          limitBytes: 1 << 20,
          ...all,
        });
        expect(oneMore.kind === "fits" && oneMore.body.length).toBeGreaterThan(limit);
      }
    }
  });

  it("keeps no turn when even the newest does not fit, and sends the input", () => {
    const answer = fitted(aloneBytes);
    expect(answer.droppedTurns).toBe(4);
    expect(sent(answer.body)).toEqual(["Next?"]);
  });

  it("is too large where nothing may be left out", () => {
    const refuse = { canDrop: false, olderUnread: false };
    expect(continuedBody(raw, turns, { limitBytes: whole.body.length, ...refuse }).kind).toBe(
      "fits",
    );
    expect(continuedBody(raw, turns, { limitBytes: whole.body.length - 1, ...refuse })).toEqual({
      kind: "too-large",
      bytes: whole.body.length,
    });
  });

  it("treats older turns left unread as over the limit", () => {
    expect(
      continuedBody(raw, turns, { limitBytes: 1 << 20, canDrop: false, olderUnread: true }).kind,
    ).toBe("too-large");
    // Where turns may go, what was read is sent as it fits.
    expect(fitted(1 << 20, { canDrop: true, olderUnread: true }).droppedTurns).toBe(0);
  });

  it("keeps a list input and the body's other fields as the caller sent them", () => {
    const list = Buffer.from(
      JSON.stringify({
        model: "m",
        input: [{ role: "user", content: "Hi" }],
        metadata: { a: "b" },
      }),
    );
    const answer = continuedBody(list, [turn(1, 1)], { limitBytes: 1 << 20, ...all });
    expect(answer.kind === "fits" && JSON.parse(answer.body.toString())).toEqual({
      model: "m",
      input: [
        { type: "message", role: "user", content: "question 1 é" },
        { type: "message", role: "assistant", content: "answer 1" },
        { role: "user", content: "Hi" },
      ],
      metadata: { a: "b" },
    });
  });
});
