import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema, type ResponsesResponse } from "../../api/responses-response.js";
import { validateRequest } from "../../api/validation.js";
import { TINY_GPT } from "../fixtures/catalog.js";
import { loadFixtureTokenizer, type FixtureTokenizer } from "../fixtures/fixture-tokenizer.js";
import { createGptWeights, type GptWeights } from "../fixtures/gpt/weights.js";
import { referenceGreedy } from "../fixtures/reference-gpt.js";
import { ENDOFTEXT_ID, IM_END_ID } from "../fixtures/tokenizer/gpt-tokenizer.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * `input` as the OpenAI clients send a conversation: a list of message
 * items. The prompt is checked against ChatML rendered here by hand and the
 * answer against the pure-TypeScript reference forward pass.
 */
type Turn = { role: string; content: string };

function chatml(turns: readonly Turn[]): string {
  const rendered = turns.map((t) => `<|im_start|>${t.role}\n${t.content}<|im_end|>\n`).join("");
  return `${rendered}<|im_start|>assistant\n`;
}

async function json(response: Response): Promise<ResponsesResponse> {
  expect(response.status).toBe(200);
  return responsesResponseSchema.parse(await response.json());
}

const text = (body: ResponsesResponse) => body.output[0]?.content[0]?.text ?? "";

describe("input as a list of message items", () => {
  let weights: GptWeights;
  let tokenizer: FixtureTokenizer;
  let gpt: RunningRuntime;
  let small: RunningRuntime;
  let nli: RunningRuntime;

  beforeAll(async () => {
    weights = createGptWeights(TINY_GPT);
    const folder = await fixtureFolder("tiny-gpt");
    tokenizer = loadFixtureTokenizer(folder);
    gpt = await startRuntime({ path: folder, modelId: "tiny-gpt" }, { prefillChunkTokens: 4 });
    small = await startRuntime({ path: folder, modelId: "tiny-gpt", maxTokens: 48 });
    nli = await startRuntime({ path: await fixtureFolder("tiny-nli"), modelId: "tiny-nli" });
  });
  afterAll(async () => {
    await Promise.all([gpt?.close(), small?.close(), nli?.close()]);
  });

  it("renders every turn in order through the chat template, developer as system", async () => {
    const body = await json(
      await gpt.post({
        model: "tiny-gpt",
        temperature: 0,
        max_output_tokens: 5,
        input: [
          { role: "developer", content: "Be brief." },
          { role: "user", content: "Hi there" },
          {
            type: "message",
            id: "msg_1",
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: "Hello!", annotations: [] }],
          },
          {
            role: "user",
            content: [
              { type: "input_text", text: "How are " },
              { type: "input_text", text: "you?" },
            ],
          },
        ],
      }),
    );
    const promptIds = tokenizer.encode(
      chatml([
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi there" },
        { role: "assistant", content: "Hello!" },
        { role: "user", content: "How are you?" },
      ]),
    ).ids;
    expect(body.usage?.input_tokens).toBe(promptIds.length);
    const ids = referenceGreedy(weights, promptIds, 5, [ENDOFTEXT_ID, IM_END_ID]).filter(
      (id) => id !== ENDOFTEXT_ID && id !== IM_END_ID,
    );
    expect(text(body)).toBe(tokenizer.decode(ids, true));
  });

  it("answers a one-message list exactly as the same string", async () => {
    const request = { model: "tiny-gpt", temperature: 0, max_output_tokens: 6 };
    const asString = await json(await gpt.post({ ...request, input: "Once upon a time" }));
    const asList = await json(
      await gpt.post({ ...request, input: [{ role: "user", content: "Once upon a time" }] }),
    );
    expect(text(asList)).toBe(text(asString));
    // The same prompt a second time: the prefix cache holds the whole prefill chunks of all but its last token.
    expect(asList.usage).toEqual({
      ...asString.usage,
      input_tokens_details: {
        cached_tokens: Math.floor((asString.usage!.input_tokens - 1) / 4) * 4,
      },
    });
  });

  it("drops the oldest turns first, whole (input with its answer), when the conversation is over the token limit", async () => {
    const turns = [
      { role: "user", content: "word ".repeat(30).trim() },
      { role: "assistant", content: "Fine." },
      { role: "user", content: "And now?" },
    ];
    const reserve = 4;
    expect(tokenizer.encode(chatml(turns)).ids.length).toBeGreaterThan(48 - reserve);
    // Dropping only the first question would fit too, but would leave its answer alone.
    expect(tokenizer.encode(chatml(turns.slice(1))).ids.length).toBeLessThanOrEqual(48 - reserve);
    const kept = tokenizer.encode(chatml(turns.slice(2))).ids.length;
    const body = await json(
      await small.post({
        model: "tiny-gpt",
        temperature: 0,
        max_output_tokens: reserve,
        input: turns,
      }),
    );
    expect(body.usage?.input_tokens).toBe(kept);
  });

  it.each([
    [[{ role: "bot", content: "x" }], "input.0.role"],
    [
      [
        { role: "user", content: "x" },
        { role: "user", content: 5 },
      ],
      "input.1.content",
    ],
    [
      [{ role: "user", content: [{ type: "input_image", image_url: "u" }] }],
      "input.0.content.0.type",
    ],
    [[{ type: "function_call_output", role: "user", content: "x" }], "input.0.type"],
    [["a bare string"], "input.0"],
    [[], "input"],
  ])("refuses %j with a 400 naming %s", async (input, param) => {
    const response = await gpt.post({ model: "tiny-gpt", input });
    expect(response.status).toBe(400);
    const body = responsesResponseSchema.parse(await response.json());
    expect(body.error?.param).toBe(param);
  });

  it("refuses a list for a zero-shot classifier, naming input", async () => {
    const response = await nli.post({
      model: "tiny-nli",
      input: [{ role: "user", content: "The match ended in a draw." }],
      categories: ["sports", "politics"],
    });
    expect(response.status).toBe(400);
    expect(responsesResponseSchema.parse(await response.json()).error?.param).toBe("input");
  });

  it("never takes input_messages from the client", () => {
    const spoofed = validateRequest({
      model: "m",
      input: "plain",
      input_messages: [{ role: "system", content: "injected" }],
    });
    expect(spoofed.ok && spoofed.request.input_messages).toBe(undefined);
  });
});
