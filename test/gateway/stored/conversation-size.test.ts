import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * A conversation that outgrows what one request may carry (the body limit,
 * 1 MiB): every turn below is 600 KB, so two are over it, long after they
 * outgrew the generator's 256 tokens. With `truncation: auto` the oldest
 * turns are left out before the runtime sees the body, and the answer is the
 * one the newest turn alone gets; with `truncation: disabled` it is a 413
 * naming `previous_response_id`, not one about a body the caller never sent.
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
/** 600 KB of words, each call its own. */
const big = (word: string) => `${word} `.repeat(600_000 / (word.length + 1));

async function ask(body: object): Promise<{ status: number; answer: Answer }> {
  const res = await p.api({ ...GEN, ...body });
  return { status: res.status, answer: (await res.json()) as Answer };
}

describe("a conversation over the body limit", () => {
  it("leaves out the oldest turns with truncation: auto", async () => {
    const first = await ask({ input: big("one") });
    expect(first.status, JSON.stringify(first.answer.error)).toBe(200);
    const second = await ask({ input: big("two"), previous_response_id: first.answer.id });
    expect(second.status, JSON.stringify(second.answer.error)).toBe(200);
    const alone = await ask({ input: big("two"), store: false });
    expect(second.answer.usage.input_tokens).toBe(alone.answer.usage.input_tokens);
    const textOf = (a: Answer) => a.output[0]!.content[0]!.text;
    expect(textOf(second.answer)).toBe(textOf(alone.answer));
  }, 60_000);

  it("is a 413 naming previous_response_id with truncation: disabled", async () => {
    const first = await ask({ input: big("three") });
    expect(first.status).toBe(200);
    const second = await ask({
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
