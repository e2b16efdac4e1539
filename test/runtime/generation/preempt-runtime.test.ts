import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema } from "../../../api/responses-response.js";
import { PRIORITY_HEADER } from "../../../api/runtime-wire.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "../support/runtime-server.js";

/**
 * Preemption through the runtime's HTTP server, as the batch workers reach
 * it (`x-modelgate-priority: batch`): with two decode places both held by
 * long batch generations, an interactive request is answered before either
 * ends, and each batch answer (text and usage) is the one it gets when
 * nothing preempts it. The metric counts the preemption.
 */
const LONG = "A long story about ships, harbours and the open sea at night";

describe("preemption through the runtime (tiny-gpt, two decode places)", () => {
  let runtime: RunningRuntime;

  beforeAll(async () => {
    const path = await fixtureFolder("tiny-gpt");
    runtime = await startRuntime({ path, modelId: "tiny-gpt" }, { generationConcurrency: 2 });
  });
  afterAll(async () => runtime?.close());

  async function generate(input: string, maxTokens: number, batch: boolean) {
    const response = await runtime.post(
      { model: "tiny-gpt", input, temperature: 0, max_output_tokens: maxTokens },
      batch ? { [PRIORITY_HEADER]: "batch" } : {},
    );
    expect(response.status).toBe(200);
    const body = responsesResponseSchema.parse(await response.json());
    return { body, doneAt: performance.now() };
  }

  async function preemptions(): Promise<number> {
    return (await runtime.metrics.preemptions.get()).values[0]?.value ?? 0;
  }

  /** Decode steps so far, from the batch-size histogram's count. */
  async function steps(): Promise<number> {
    const metric = await runtime.metrics.batchSize.get();
    return metric.values.find((v) => v.metricName?.endsWith("_count"))?.value ?? 0;
  }

  it("answers an interactive request before the batch generations holding every place end; their text and usage are unchanged", async () => {
    const lines = [
      [LONG, 160],
      [`${LONG}, told again`, 150],
    ] as const;
    const alone = await Promise.all(lines.map(([input, n]) => generate(input, n, true)));
    for (const { body } of alone) expect(body.usage?.output_tokens).toBeGreaterThan(100);
    expect(await preemptions()).toBe(0);

    const stepsBefore = await steps();
    const batch = lines.map(([input, n]) => generate(input, n, true));
    while ((await steps()) - stepsBefore < 8) await new Promise((resolve) => setImmediate(resolve));
    const interactive = await generate("Quick question", 6, false);
    const beside = await Promise.all(batch);

    for (const { doneAt } of beside) expect(interactive.doneAt).toBeLessThan(doneAt);
    expect(await preemptions()).toBe(1);
    expect(interactive.body.usage?.output_tokens).toBeGreaterThan(0);
    beside.forEach(({ body }, i) => {
      const before = alone[i]!.body;
      expect(body.output[0]?.content[0]?.text).toBe(before.output[0]?.content[0]?.text);
      // The resumed sequence's prompt is counted once and its output once.
      expect(body.usage).toEqual(before.usage);
    });
  });
});
