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

/** Decode steps and the rows they carried, from the runtime's batch-size histogram. */
async function steps(runtime: RunningRuntime): Promise<{ count: number; rows: number }> {
  const metric = await runtime.metrics.batchSize.get();
  const count = metric.values.find((v) => v.metricName?.endsWith("_count"))?.value ?? 0;
  const rows = metric.values.find((v) => v.metricName?.endsWith("_sum"))?.value ?? 0;
  return { count, rows };
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

  async function generate(input: string, maxTokens: number) {
    const response = await runtime.post({
      model: "tiny-gpt",
      input,
      temperature: 0,
      max_output_tokens: maxTokens,
    });
    return responsesResponseSchema.parse(await response.json());
  }

  function expected(input: string, maxTokens: number): number[] {
    const promptIds = tokenizer.encode(chatml(input)).ids;
    return referenceGreedy(weights, promptIds, maxTokens, STOP_IDS).filter(
      (id) => !STOP_IDS.includes(id),
    );
  }

  it("decodes concurrent requests of different lengths, and late joiners, exactly as the reference does alone", async () => {
    const long = ["A long story about ships, harbours and the open sea at night", 160] as const;
    const together = [
      ["Hi", 5],
      ["Tell me about the weather", 9],
      ["x", 20],
      ["The quick brown fox jumps over the lazy dog", 3],
    ] as const;
    const late = [
      ["Another one joins the batch late", 11],
      ["And one more, later still", 7],
    ] as const;
    // The long sequence decoded alone first: the pure-TypeScript reference is
    // too slow for 160 tokens, and batched-vs-alone is the property under test.
    const alone = await generate(...long);
    // It must outlive the late arrivals for them to join a running batch.
    expect(alone.usage?.output_tokens).toBeGreaterThan(100);

    const before = await steps(runtime);
    const longAnswer = generate(...long).then((body) => ({ body, doneAt: performance.now() }));
    const firstAnswers = Promise.all(together.map(([input, n]) => generate(input, n)));
    // Wait until the batch has decoded a few steps, then add sequences to it.
    while ((await steps(runtime)).count - before.count < 8)
      await new Promise((resolve) => setImmediate(resolve));
    const lateSentAt = performance.now();
    const lateAnswers = await Promise.all(late.map(([input, n]) => generate(input, n)));
    const { body: longBody, doneAt: longDoneAt } = await longAnswer;
    const after = await steps(runtime);

    expect(lateSentAt).toBeLessThan(longDoneAt);
    const firsts = await firstAnswers;
    expect(longBody.output[0]?.content[0]?.text).toBe(alone.output[0]?.content[0]?.text);
    const answered = [
      ...together.map(([input, n], i) => ({ input, n, body: firsts[i]! })),
      ...late.map(([input, n], i) => ({ input, n, body: lateAnswers[i]! })),
    ];
    for (const { input, n, body } of answered) {
      const ids = expected(input, n);
      expect(body.output[0]?.content[0]?.text, input).toBe(tokenizer.decode(ids, true));
      expect(body.usage?.output_tokens, input).toBe(ids.length);
    }
    // Every shorter sequence decoded alongside the long one: their tokens (all
    // but the first, which comes from the prefill) rode in shared steps, so the
    // steps carried at least that many rows beyond one each.
    const shared = after.rows - before.rows - (after.count - before.count);
    const riders = [...together, ...late].reduce(
      (sum, [input, n]) => sum + Math.max(0, expected(input, n).length - 1),
      0,
    );
    expect(shared).toBeGreaterThanOrEqual(riders);
  });
});
