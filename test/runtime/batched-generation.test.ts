import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema } from "../../api/responses-response.js";
import { TINY_GPT } from "../fixtures/catalog.js";
import { loadFixtureTokenizer, type FixtureTokenizer } from "../fixtures/fixture-tokenizer.js";
import { createGptWeights, type GptWeights } from "../fixtures/gpt/weights.js";
import { referenceGreedy } from "../fixtures/reference-gpt.js";
import { ENDOFTEXT_ID, IM_END_ID } from "../fixtures/tokenizer/gpt-tokenizer.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

const STOP_IDS = [ENDOFTEXT_ID, IM_END_ID];

function chatml(input: string): string {
  return `<|im_start|>user\n${input}<|im_end|>\n<|im_start|>assistant\n`;
}

function stepBatchSizes(metrics: string): { count: number; sum: number } {
  const count = Number(/modelgate_runtime_batch_size_count\{[^}]*\} (\d+)/.exec(metrics)?.[1]);
  const sum = Number(/modelgate_runtime_batch_size_sum\{[^}]*\} (\d+)/.exec(metrics)?.[1]);
  return { count, sum };
}

describe("continuous batching of generation (one session.run for many sequences)", () => {
  let weights: GptWeights;
  let tokenizer: FixtureTokenizer;
  let runtime: RunningRuntime;

  beforeAll(async () => {
    weights = createGptWeights(TINY_GPT);
    const path = await fixtureFolder("tiny-gpt");
    tokenizer = loadFixtureTokenizer(path);
    runtime = await startRuntime({ path, modelId: "tiny-gpt" }, { generationConcurrency: 8 });
  });
  afterAll(async () => runtime?.close());

  it("decodes concurrent requests of different lengths exactly as the reference does alone", async () => {
    const requests = [
      ["Hi", 5],
      ["A much longer prompt about ships, harbours, sailors and the open sea at night", 14],
      ["Tell me about the weather", 9],
      ["x", 20],
      ["The quick brown fox jumps over the lazy dog", 3],
      ["Another one joins the batch late", 11],
    ] as const;
    const before = stepBatchSizes(await (await fetch(`${runtime.url}/metrics`)).text());
    const answers = await Promise.all(
      requests.map(async ([input, maxTokens], i) => {
        // Stagger arrivals so that some sequences join a batch already decoding.
        await new Promise((resolve) => setTimeout(resolve, i * 15));
        const response = await runtime.post({
          model: "tiny-gpt",
          input,
          temperature: 0,
          max_output_tokens: maxTokens,
        });
        return responsesResponseSchema.parse(await response.json());
      }),
    );
    const after = stepBatchSizes(await (await fetch(`${runtime.url}/metrics`)).text());

    requests.forEach(([input, maxTokens], i) => {
      const promptIds = tokenizer.encode(chatml(input)).ids;
      const reference = referenceGreedy(weights, promptIds, maxTokens, STOP_IDS).filter(
        (id) => !STOP_IDS.includes(id),
      );
      const body = answers[i]!;
      expect(body.output[0]?.content[0]?.text).toBe(tokenizer.decode(reference, true));
      expect(body.usage).toMatchObject({
        input_tokens: promptIds.length,
        output_tokens: reference.length,
      });
    });
    // Fewer decode steps than tokens: sequences shared steps.
    const steps = after.count - before.count;
    const rowsStepped = after.sum - before.sum;
    expect(rowsStepped / steps).toBeGreaterThan(1.5);
  });
});
