import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema } from "../../api/responses-response.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * A caller that hangs up, over real HTTP: while its request waits, the
 * request leaves the queue and never reaches the model (and is logged as a
 * 499, not as our failure); while its answer is being generated, generation
 * stops at the next token.
 */
const BUDGET = 300;
const STORY = "A long story about ships, harbours and the open sea at night";

interface Readable {
  get(): Promise<{ values: ReadonlyArray<{ metricName?: string; value: number }> }>;
}

/** A counter's value, or the series of a histogram whose name ends with `suffix`. */
async function total(metric: Readable, suffix = ""): Promise<number> {
  const { values } = await metric.get();
  return values.find((v) => (v.metricName ?? "").endsWith(suffix))?.value ?? 0;
}

/** Polls a condition of the server under test; the test's timeout bounds it. */
async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 2));
}

describe("a client that disconnects", () => {
  let runtime: RunningRuntime;
  const logs: Array<{ level: number; code?: string; status?: number }> = [];

  beforeAll(async () => {
    const path = await fixtureFolder("bench-gpt");
    const logger = pino(
      { level: "info" },
      { write: (line: string) => logs.push(JSON.parse(line) as (typeof logs)[number]) },
    );
    runtime = await startRuntime(
      { path, modelId: "bench-gpt" },
      { generationConcurrency: 1, maxQueue: 4 },
      Math.random,
      logger,
    );
  });
  afterAll(async () => runtime?.close());

  const send = (signal?: AbortSignal) =>
    fetch(`${runtime.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "bench-gpt",
        input: STORY,
        temperature: 0,
        max_output_tokens: BUDGET,
      }),
      ...(signal ? { signal } : {}),
    });

  it("while waiting is never run, and while generating stops at its next token", async () => {
    const { metrics, service } = runtime;
    // Alone, this request uses its whole budget: an early stop below is the hang-up's doing.
    const alone = responsesResponseSchema.parse(await (await send()).json());
    expect(alone.usage?.output_tokens).toBe(BUDGET);

    const outputBefore = await total(metrics.outputTokens);
    const admittedBefore = await total(metrics.queueWait, "_count");
    const stepsBefore = await total(metrics.batchSize, "_count");

    const generating = new AbortController();
    const first = send(generating.signal).catch(() => "hung up");
    await until(async () => (await total(metrics.batchSize, "_count")) > stepsBefore + 5);

    const waiting = new AbortController();
    const second = send(waiting.signal).catch(() => "hung up");
    await until(() => service.queueDepth === 1);
    waiting.abort();
    await until(() => service.queueDepth === 0);
    expect(service.inFlight).toBe(1);

    generating.abort();
    await until(() => service.inFlight === 0);
    expect(await Promise.all([first, second])).toEqual(["hung up", "hung up"]);

    // Only the first request ever left the queue for the model...
    expect((await total(metrics.queueWait, "_count")) - admittedBefore).toBe(1);
    // ...and it stopped well short of its budget.
    const generated = (await total(metrics.outputTokens)) - outputBefore;
    expect(generated).toBeGreaterThan(5);
    expect(generated).toBeLessThan(BUDGET);

    // The hang-up while waiting is logged as a refused 499, not as a failure of ours.
    expect(logs.filter((line) => line.level >= 50)).toEqual([]);
    expect(logs).toContainEqual(
      expect.objectContaining({ level: 30, code: "client_closed_request", status: 499 }),
    );

    // The runtime serves on, with the same greedy answer as before.
    const after = responsesResponseSchema.parse(await (await send()).json());
    expect(after.output[0]?.content[0]?.text).toBe(alone.output[0]?.content[0]?.text);
  });
});
