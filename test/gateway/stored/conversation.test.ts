import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, SECRETS, type Platform } from "../support/platform.js";

/**
 * previous_response_id through the whole path, on the fixture generator
 * (greedy): a continued turn must answer exactly as the same conversation
 * sent in full as message items, with the same input tokens: the model
 * really saw the earlier turns, in order, without their instructions.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

interface Answer {
  id: string;
  previous_response_id: string | null;
  output: { content: { text: string }[] }[];
  usage: { input_tokens: number; output_tokens: number };
}
const textOf = (a: Answer) => a.output[0]!.content[0]!.text;
const GEN = { model: "tiny-gpt", max_output_tokens: 6, temperature: 0 };

async function ok(res: Response): Promise<Answer> {
  const body = (await res.json()) as Answer;
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body;
}
const ask = (body: object, headers: Record<string, string> = {}) =>
  p.api({ ...GEN, ...body }, { headers }).then(ok);

async function errorOf(res: Response): Promise<{ status: number; param: unknown; body: string }> {
  const body = (await res.json()) as { error: { param?: unknown } };
  return { status: res.status, param: body.error.param, body: JSON.stringify(body) };
}

describe("previous_response_id", () => {
  it("continues the stored conversation: every earlier turn in order, then the new input", async () => {
    const first = await ask({ input: "The capital of France is", instructions: "Be brief." });
    const second = await ask({ input: "And Germany?", previous_response_id: first.id });
    expect(second.previous_response_id).toBe(first.id);
    // The same conversation sent whole, without the first turn's instructions.
    const whole = await ask({
      store: false,
      input: [
        { role: "user", content: "The capital of France is" },
        { role: "assistant", content: textOf(first) },
        { role: "user", content: "And Germany?" },
      ],
    });
    expect(second.usage.input_tokens).toBe(whole.usage.input_tokens);
    expect(textOf(second)).toBe(textOf(whole));
    // The earlier turns are counted: far more than the new input alone.
    const alone = await ask({ store: false, input: "And Germany?" });
    expect(second.usage.input_tokens).toBeGreaterThan(
      alone.usage.input_tokens + first.usage.output_tokens,
    );

    const third = await ask({
      input: [{ role: "user", content: "And Italy?" }],
      previous_response_id: second.id,
    });
    const all = await ask({
      store: false,
      input: [
        { role: "user", content: "The capital of France is" },
        { role: "assistant", content: textOf(first) },
        { role: "user", content: "And Germany?" },
        { role: "assistant", content: textOf(second) },
        { role: "user", content: "And Italy?" },
      ],
    });
    expect(third.usage.input_tokens).toBe(all.usage.input_tokens);
    expect(textOf(third)).toBe(textOf(all));

    // A turn's input items are its own input only.
    const items = await fetch(`${p.url}/v1/responses/${third.id}/input_items`, {
      headers: { "x-api-key": p.keys.acme.key },
    });
    const list = (await items.json()) as { data: { content: { text: string }[] }[] };
    expect(list.data.map((i) => i.content[0]!.text)).toEqual(["And Italy?"]);
  });

  it("continues a streamed create as well", async () => {
    const first = await ask({ input: "Once upon a time" });
    const res = await p.api({
      ...GEN,
      input: "Then?",
      stream: true,
      previous_response_id: first.id,
    });
    const text = await res.text();
    const data = text
      .trim()
      .split("\n\n")
      .at(-1)!
      .split("\n")
      .find((l) => l.startsWith("data: "))!
      .slice(6);
    const streamed = (JSON.parse(data) as { response: Answer }).response;
    const whole = await ask({
      store: false,
      input: [
        { role: "user", content: "Once upon a time" },
        { role: "assistant", content: textOf(first) },
        { role: "user", content: "Then?" },
      ],
    });
    expect(streamed.usage.input_tokens).toBe(whole.usage.input_tokens);
    expect(textOf(streamed)).toBe(textOf(whole));
  });

  it("is a 404 naming previous_response_id for an unknown, foreign, unstored or deleted id, alike", async () => {
    const shapeOf = async (id: string, headers: Record<string, string> = {}) => {
      const error = await errorOf(
        await p.api({ ...GEN, input: "Hi", previous_response_id: id }, { headers }),
      );
      expect(error.status).toBe(404);
      expect(error.param).toBe("previous_response_id");
      return error.body.replaceAll(id, "<id>");
    };
    const never = await shapeOf("resp_000000000000000000000000000000000000000000000000");

    const foreign = await ask({ input: "Hi" }, { "x-project-id": "web" });
    expect(await shapeOf(foreign.id)).toBe(never);
    expect(await shapeOf(foreign.id, { "x-api-key": p.keys.limited.key })).toBe(never);
    const unstored = await ask({ input: "Hi", store: false });
    expect(await shapeOf(unstored.id)).toBe(never);
    const deleted = await ask({ input: "Hi" });
    await fetch(`${p.url}/v1/responses/${deleted.id}`, {
      method: "DELETE",
      headers: { "x-api-key": p.keys.acme.key },
    });
    expect(await shapeOf(deleted.id)).toBe(never);
    // The payment route does not see the API-key route's responses.
    const paid = await errorOf(
      await p.pay({ ...GEN, input: "Hi", previous_response_id: foreign.id }),
    );
    expect(paid).toMatchObject({ status: 404, param: "previous_response_id" });
  });

  it("is refused on a model that does not generate", async () => {
    const first = await ask({ input: "Hi" });
    const error = await errorOf(
      await p.api({
        model: "tiny-nli",
        input: "I love this",
        instructions: "positive, negative",
        previous_response_id: first.id,
      }),
    );
    expect(error).toMatchObject({ status: 400, param: "previous_response_id" });
  });

  it("applies the token limit to the whole conversation: 420 where the model errors", async () => {
    const long = "one two three four five six seven eight nine ten ".repeat(8);
    const first = await ask({ input: long });
    expect(first.usage.input_tokens).toBeLessThan(256);
    const alone = await ask({ input: long, store: false });
    expect(alone.usage.input_tokens).toBeLessThan(256);
    const error = await errorOf(
      await p.api({ ...GEN, input: long, previous_response_id: first.id }),
    );
    expect(error.status).toBe(420);
  });

  it("continues on the payment route within the signing key's responses", async () => {
    const first = await ok(await p.pay({ ...GEN, input: "The capital of France is" }));
    const second = await ok(
      await p.pay({ ...GEN, input: "And Germany?", previous_response_id: first.id }),
    );
    const whole = await ask({
      store: false,
      input: [
        { role: "user", content: "The capital of France is" },
        { role: "assistant", content: textOf(first) },
        { role: "user", content: "And Germany?" },
      ],
    });
    expect(second.usage.input_tokens).toBe(whole.usage.input_tokens);
    expect(textOf(second)).toBe(textOf(whole));
    const raw = JSON.stringify({ ...GEN, input: "And Germany?", previous_response_id: first.id });
    const other = await errorOf(await p.pay(raw, { signature: p.sign(raw, "k2", SECRETS.k2new) }));
    expect(other).toMatchObject({ status: 404, param: "previous_response_id" });
  });
});
