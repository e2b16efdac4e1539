import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * The token limit over a whole continued conversation, on a generator that
 * truncates (256 tokens): with `truncation: auto` the oldest turns of the
 * conversation go first, whole (a stored turn's input with its answer), and the answer is the one the remaining
 * conversation gets when sent whole; with `truncation: disabled` it is a 420.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ gptOverflow: "truncate", withoutPayments: true });
});
afterAll(async () => p?.close());

interface Answer {
  id: string;
  output: { content: { text: string }[] }[];
  usage: { input_tokens: number };
  error?: { code: string; param: string | null; message: string };
}
const GEN = { model: "tiny-gpt", max_output_tokens: 4, temperature: 0 };
const textOf = (a: Answer) => a.output[0]!.content[0]!.text;

async function ask(body: object): Promise<Answer> {
  const res = await p.api({ ...GEN, ...body });
  const answer = (await res.json()) as Answer;
  expect(res.status, JSON.stringify(answer)).toBe(200);
  return answer;
}

describe("a continued conversation over the token limit", () => {
  const oldest = "one two three four five six seven eight nine ten ".repeat(8);
  const newest = "alpha beta gamma delta epsilon zeta eta theta iota kappa ".repeat(6);

  it("drops the oldest turns first with truncation: auto", async () => {
    const first = await ask({ input: oldest });
    const alone = await ask({ input: newest, store: false });
    // Each fits alone; together they do not.
    expect(first.usage.input_tokens + alone.usage.input_tokens).toBeGreaterThan(256);

    const second = await ask({ input: newest, previous_response_id: first.id });
    expect(second.usage.input_tokens).toBeLessThanOrEqual(256 - GEN.max_output_tokens);
    // The first turn went whole, its input with its answer, although its answer alone
    // and the new input would fit: never half a turn.
    const half = await ask({
      store: false,
      input: [
        { role: "assistant", content: textOf(first) },
        { role: "user", content: newest },
      ],
    });
    expect(half.usage.input_tokens).toBeLessThanOrEqual(256 - GEN.max_output_tokens);
    expect(second.usage.input_tokens).toBe(alone.usage.input_tokens);
    expect(textOf(second)).toBe(textOf(alone));
  });

  it("drops as many of the oldest turns as it must, whole, and keeps the newer ones", async () => {
    const first = await ask({ input: oldest });
    const short = "And a short question?";
    const second = await ask({ input: short, previous_response_id: first.id });
    const third = await ask({ input: newest, previous_response_id: second.id });
    const rest = await ask({
      store: false,
      input: [
        { role: "user", content: short },
        { role: "assistant", content: textOf(second) },
        { role: "user", content: newest },
      ],
    });
    expect(third.usage.input_tokens).toBe(rest.usage.input_tokens);
    expect(textOf(third)).toBe(textOf(rest));
  });

  it("is a 420 with truncation: disabled", async () => {
    const first = await ask({ input: oldest });
    const res = await p.api({
      ...GEN,
      input: newest,
      truncation: "disabled",
      previous_response_id: first.id,
    });
    expect(res.status).toBe(420);
    const body = (await res.json()) as { error: { code: string } };
    expect(body.error.code).toBe("context_length_exceeded");
  });
});

/** 600 KB of words, each call its own. */
const big = (word: string) => `${word} `.repeat(600_000 / (word.length + 1));

async function send(body: object): Promise<{ status: number; answer: Answer }> {
  const res = await p.api({ ...GEN, ...body });
  return { status: res.status, answer: (await res.json()) as Answer };
}

/**
 * A conversation that outgrows what one request may carry (the body limit,
 * 1 MiB): every turn below is 600 KB, so two are over it, long after they
 * outgrew the generator's 256 tokens. With `truncation: auto` the oldest
 * turns are left out before the runtime sees the body, and the answer is the
 * one the newest turn alone gets; with `truncation: disabled` it is a 413
 * naming `previous_response_id`, not one about a body the caller never sent.
 */
describe("a continued conversation over the body limit", () => {
  it("leaves out the oldest turns with truncation: auto", async () => {
    const first = await send({ input: big("one") });
    expect(first.status, JSON.stringify(first.answer.error)).toBe(200);
    const second = await send({ input: big("two"), previous_response_id: first.answer.id });
    expect(second.status, JSON.stringify(second.answer.error)).toBe(200);
    const alone = await send({ input: big("two"), store: false });
    expect(second.answer.usage.input_tokens).toBe(alone.answer.usage.input_tokens);
    expect(textOf(second.answer)).toBe(textOf(alone.answer));
  }, 60_000);

  it("is a 413 naming previous_response_id with truncation: disabled", async () => {
    const first = await send({ input: big("three") });
    expect(first.status).toBe(200);
    const second = await send({
      input: big("four"),
      previous_response_id: first.answer.id,
      truncation: "disabled",
    });
    expect(second.status).toBe(413);
    expect(second.answer.error).toMatchObject({
      code: "request_too_large",
      param: "previous_response_id",
    });
    expect(second.answer.error?.message).toContain('truncation "auto"');
  }, 60_000);
});
