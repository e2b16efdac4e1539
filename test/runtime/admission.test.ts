import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResponsesRequest } from "../../api/responses-request.js";
import { validateRequest } from "../../api/validation.js";
import { isCodedError } from "../../lib/coded-error.js";
import type { ZeroShotClassifier } from "../../runtime/classify/classifier.js";
import { AdmissionQueue } from "../../runtime/engine/admission-queue.js";
import { BatchExecutor } from "../../runtime/engine/batch-executor.js";
import type { TensorData } from "../../runtime/engine/session.js";
import { DecodeScheduler } from "../../runtime/generation/decode-scheduler.js";
import type { DecoderSession } from "../../runtime/generation/decoder-feeds.js";
import type { DecodeJob, Generated } from "../../runtime/generation/generate.js";
import type { TextGenerator } from "../../runtime/generation/text-generator.js";
import { createRuntimeMetrics, type RuntimeMetrics } from "../../runtime/metrics.js";
import {
  DEFAULT_THROUGHPUT,
  ModelService,
  type ServiceResult,
} from "../../runtime/model-service.js";
import { loadModel, type LoadedModel } from "../../runtime/model/load-model.js";
import { fixtureFolder } from "./support/runtime-server.js";

/**
 * The admission queue in front of the real executors, over the generated
 * fixture models: what reaches the model is recorded at the model's own
 * boundary (the session's runs, the classifier's batches), never guessed.
 */

function request(model: string, fields: Record<string, unknown>): ResponsesRequest {
  const validation = validateRequest({ model, temperature: 0, ...fields });
  if (!validation.ok) throw new Error(validation.problem.message);
  return validation.request;
}

function codeOf(error: unknown): string | undefined {
  return isCodedError(error) ? error.code : undefined;
}

async function load(name: string): Promise<LoadedModel> {
  return loadModel({ path: await fixtureFolder(name), overflow: "truncate", threads: 1 });
}

function generatorOf(model: LoadedModel): TextGenerator {
  if (model.task !== "text-generation") throw new Error("not a generator");
  return model.generator;
}

/** The real session, with every prompt it is fed (a run with an empty past) written down. */
function recordingSession(generator: TextGenerator) {
  const prefills: number[][] = [];
  let runs = 0;
  const pastName = generator.io.cache[0]?.pastName ?? "";
  const onRun: Array<(runs: number) => void> = [];
  const session: DecoderSession = {
    run(feeds: Record<string, TensorData>, names?: readonly string[]) {
      runs++;
      for (const listener of onRun) listener(runs);
      if (feeds[pastName]?.dims[2] === 0) {
        prefills.push(Array.from(feeds[generator.io.inputIds]?.data as BigInt64Array, Number));
      }
      return generator.session.run(feeds, names);
    },
  };
  return { session, prefills, onRun };
}

describe("the decode scheduler, fed by the admission queue (tiny-gpt)", () => {
  let model: LoadedModel;
  let generator: TextGenerator;

  beforeAll(async () => {
    model = await load("tiny-gpt");
    generator = generatorOf(model);
  });
  afterAll(async () => model?.session.release());

  /** The real decode scheduler on a recorded session, fed by a queue of `maxQueue`. */
  const scheduled = (maxQueue: number, maxBatch: number) => {
    const recorder = recordingSession(generator);
    const queue = new AdmissionQueue<DecodeJob, Generated>({ maxQueue });
    new DecodeScheduler(queue, recorder.session, generator.io, {
      maxBatch,
      eosIds: generator.eosIds,
    });
    return { recorder, queue };
  };

  const job = (input: string, maxNewTokens: number): DecodeJob => {
    const prepared = generator.prepare(
      request("tiny-gpt", { input, max_output_tokens: maxNewTokens }),
    );
    return generator.job(prepared, () => 0.5);
  };

  it("a request aborted while it waits never reaches the model and frees its place; the rest keep their order and their single-sequence result", async () => {
    const { recorder, queue } = scheduled(2, 1);
    const jobs = {
      first: job("The first request runs at once", 12),
      gone: job("This caller hangs up while it waits", 12),
      second: job("The second request waits its turn", 12),
      refused: job("No room for this one", 12),
      third: job("A later request takes the freed place", 12),
    };
    const controller = new AbortController();
    const first = queue.submit(jobs.first);
    const gone = queue.submit(jobs.gone, controller.signal);
    const second = queue.submit(jobs.second);
    const refused = await queue.submit(jobs.refused).catch((error: unknown) => error);
    expect(codeOf(refused)).toBe("rate_limit_exceeded");

    controller.abort(new Error("client closed the connection"));
    expect(queue.depth).toBe(1);
    await expect(gone).rejects.toSatisfy((e) => codeOf(e) === "client_closed_request");
    const third = queue.submit(jobs.third);

    const answers = await Promise.all([first, second, third]);
    expect(recorder.prefills).toEqual([
      jobs.first.promptIds,
      jobs.second.promptIds,
      jobs.third.promptIds,
    ]);
    const alone = [jobs.first, jobs.second, jobs.third].map((j) => generator.decode(j));
    expect(answers.map((a) => a.ids)).toEqual((await Promise.all(alone)).map((a) => a.ids));
    expect(queue.inFlight).toBe(0);
  });

  it("tells a request it is taken before its prompt reaches the model, and never one refused or gone while it waited", async () => {
    const { recorder, queue } = scheduled(2, 1);
    const told: string[] = [];
    const tell = (name: string) => () =>
      told.push(`${name} taken after ${recorder.prefills.length} prefills`);
    const jobs = {
      first: job("The first request runs at once", 6),
      gone: job("This caller hangs up while it waits", 6),
      second: job("The second request waits its turn", 6),
      refused: job("No room for this one", 6),
    };
    const controller = new AbortController();
    const first = queue.submit(jobs.first, undefined, "interactive", tell("first"));
    const gone = queue.submit(jobs.gone, controller.signal, "interactive", tell("gone"));
    const second = queue.submit(jobs.second, undefined, "interactive", tell("second"));
    const refused = await queue
      .submit(jobs.refused, undefined, "interactive", tell("refused"))
      .catch((error: unknown) => error);
    expect(codeOf(refused)).toBe("rate_limit_exceeded");
    controller.abort(new Error("client closed the connection"));
    await expect(gone).rejects.toSatisfy((e) => codeOf(e) === "client_closed_request");
    await Promise.all([first, second]);
    expect(told).toEqual(["first taken after 0 prefills", "second taken after 1 prefills"]);
    expect(recorder.prefills).toEqual([jobs.first.promptIds, jobs.second.promptIds]);
  });

  it("a sequence whose caller goes away mid-decode stops at its next token; the batch decodes on unchanged", async () => {
    const { recorder, queue } = scheduled(4, 4);
    const leaving = job("A long story about ships, harbours and the open sea at night", 60);
    const staying = job("Tell me about the weather", 30);
    const leavingAlone = await generator.decode(leaving);
    const stayingAlone = await generator.decode(staying);
    expect(leavingAlone.ids.length).toBe(60);

    const controller = new AbortController();
    // Two prefills, then decode steps: the caller leaves during the fifth step.
    recorder.onRun.push((runs) => {
      if (runs === 2 + 5) controller.abort();
    });
    const [left, stayed] = await Promise.all([
      queue.submit(leaving, controller.signal),
      queue.submit(staying),
    ]);
    expect(left.stopReason).toBe("aborted");
    // The first token comes from the prefill, one more from each of the five steps.
    expect(left.ids).toEqual(leavingAlone.ids.slice(0, 6));
    expect(stayed).toMatchObject({ ids: stayingAlone.ids, stopReason: stayingAlone.stopReason });
  });
});

describe("classification batches, fed by the admission queue (tiny-nli)", () => {
  it("a request aborted while it waits is never in a batch the model runs, and frees its place", async () => {
    const model = await load("tiny-nli");
    if (model.task !== "zero-shot-classification") throw new Error("not a classifier");
    const real = model.classifier;
    const seen: string[][] = [];
    const recording: ZeroShotClassifier = {
      method: real.method,
      prepare: (r) => real.prepare(r),
      runBatch: (batch) => {
        seen.push(batch.map((p) => p.labels.join(",")));
        return real.runBatch(batch);
      },
    };
    const metrics = createRuntimeMetrics({ model: "tiny-nli" });
    const service = new ModelService(
      { ...model, classifier: recording },
      { ...DEFAULT_THROUGHPUT, maxBatchSize: 2, batchWindowMs: 0, maxQueue: 2 },
      metrics,
      Math.random,
    );
    const ask = (labels: string, signal?: AbortSignal) =>
      service.respond(
        request("tiny-nli", { input: "The team won the match", categories: labels.split(",") }),
        signal,
      );
    try {
      const controller = new AbortController();
      const running = ask("sports");
      const gone = ask("politics", controller.signal);
      const waiting = ask("cooking");
      await expect(ask("music")).rejects.toSatisfy((e) => codeOf(e) === "rate_limit_exceeded");
      controller.abort();
      await expect(gone).rejects.toSatisfy((e) => codeOf(e) === "client_closed_request");
      const later = ask("weather");
      await Promise.all([running, waiting, later]);
      expect(seen).toEqual([["sports"], ["cooking", "weather"]]);
    } finally {
      service.close();
      await model.session.release();
    }
  });
});

describe("the batch lane in front of a real classifier (tiny-nli)", () => {
  it("interactive requests overtake queued batch lines, and share a step with few of them", async () => {
    const model = await load("tiny-nli");
    if (model.task !== "zero-shot-classification") throw new Error("not a classifier");
    const real = model.classifier;
    const seen: string[][] = [];
    const recording: ZeroShotClassifier = {
      method: real.method,
      prepare: (r) => real.prepare(r),
      runBatch: (batch) => {
        seen.push(batch.map((p) => p.labels.join(",")));
        return real.runBatch(batch);
      },
    };
    const service = new ModelService(
      { ...model, classifier: recording },
      { ...DEFAULT_THROUGHPUT, maxBatchSize: 4, batchWindowMs: 0, maxQueue: 16 },
      createRuntimeMetrics({ model: "tiny-nli" }),
      Math.random,
    );
    const ask = (label: string, priority: "interactive" | "batch") =>
      service.respond(
        request("tiny-nli", { input: "The team won the match", categories: [label] }),
        undefined,
        priority,
      );
    try {
      // The first batch line runs at once; the rest wait behind it, then two interactive ones arrive.
      const lines = Array.from({ length: 9 }, (_, n) => ask(`b${n}`, "batch"));
      const interactive = [ask("i0", "interactive"), ask("i1", "interactive")];
      await Promise.all([...lines, ...interactive]);
      expect(seen[0]).toEqual(["b0"]);
      // Next step: both interactive requests first, whenever they arrived, and a quarter
      // of the step's room (one) for batch lines while interactive traffic is about.
      expect(seen[1]).toEqual(["i0", "i1", "b1"]);
      expect(seen.slice(2).every((step) => step.length === 1)).toBe(true);
      expect(seen.flat().sort()).toEqual(
        [...lines.keys()]
          .map((n) => `b${n}`)
          .concat("i0", "i1")
          .sort(),
      );
    } finally {
      service.close();
      await model.session.release();
    }
  });
});

describe("one admission home for every executor", () => {
  const cases = [
    ["tiny-gpt", DecodeScheduler, { input: "Hello there", max_output_tokens: 8 }],
    ["tiny-gpt-nocache", BatchExecutor, { input: "Hello there", max_output_tokens: 8 }],
    ["tiny-nli", BatchExecutor, { input: "The team won the match", categories: ["sports"] }],
  ] as const;

  let metrics: RuntimeMetrics;
  const gauge = async (g: RuntimeMetrics["queueDepth"]) => (await g.get()).values[0]?.value;
  const admittedCount = async () =>
    (await metrics.queueWait.get()).values.find((v) => v.metricName?.endsWith("_count"))?.value;

  it.each(cases)(
    "%s: bounded with the same 429, abort-aware, and the load gauges come from the queue",
    async (name, executorClass, fields) => {
      const model = await load(name);
      metrics = createRuntimeMetrics({ model: name });
      const service = new ModelService(
        model,
        { maxQueue: 1, generationConcurrency: 1, maxBatchSize: 1, batchWindowMs: 0 },
        metrics,
        Math.random,
      );
      const ask = (signal?: AbortSignal): Promise<ServiceResult> =>
        service.respond(request(name, fields), signal);
      try {
        expect(service.lane.executor).toBeInstanceOf(executorClass);
        const alone = await ask();
        const admittedBefore = await admittedCount();

        const controller = new AbortController();
        const running = ask();
        const gone = ask(controller.signal);
        const refused = await ask().catch((error: unknown) => error);
        expect(codeOf(refused)).toBe("rate_limit_exceeded");
        expect(isCodedError(refused) && refused.retryAfterSeconds).toBe(1);
        expect([service.queueDepth, service.inFlight]).toEqual([1, 1]);
        expect([await gauge(metrics.queueDepth), await gauge(metrics.inFlight)]).toEqual([1, 1]);

        controller.abort(new Error("gone"));
        expect(await gauge(metrics.queueDepth)).toBe(0);
        await expect(gone).rejects.toSatisfy((e) => codeOf(e) === "client_closed_request");
        const later = ask();
        expect(await Promise.all([running, later])).toEqual([alone, alone].map(comparable));

        // Only the two that were served left the queue for the model.
        expect((await admittedCount()) ?? 0).toBe((admittedBefore ?? 0) + 2);
        expect([await gauge(metrics.queueDepth), await gauge(metrics.inFlight)]).toEqual([0, 0]);

        service.close();
        await expect(ask()).rejects.toSatisfy((e) => codeOf(e) === "model_not_ready");
      } finally {
        await model.session.release();
      }
    },
  );
});

/** A result without its timings, for comparing two runs of the same request. */
function comparable(result: ServiceResult): unknown {
  if (result.task !== "text-generation") return result;
  return {
    task: result.task,
    outcome: { ...result.outcome, firstTokenMs: expect.any(Number) as number },
  };
}
