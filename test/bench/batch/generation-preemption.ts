// `npx tsx test/bench/batch/generation-preemption.ts [--quick]` (under
// `flock /work/bench.lock`): an interactive text generation's time to first
// token while batch generations fill every decode place, with the decode
// scheduler preempting batch sequences for it and without (each batch
// sequence keeping its place to its end, as before issue 17's preemption).
//
// In this process, on the generated bench-gpt fixture (KV cache, one ORT
// thread), through the runtime's own AdmissionQueue and DecodeScheduler: no
// HTTP, so the figure is the scheduler's, not the transport's. A round keeps
// `places` batch sequences running (a new one is submitted as each ends, as
// the batch workers do) and sends interactive requests one after another,
// each after a seeded random pause, so that they land at every point of the
// batch sequences' lives. Rounds alternate the two sides (on, off, off, on,
// ...) so that a slow spell of the shared machine lands on both; the table
// gives medians over rounds, and the ratios are within this one run.
// End-of-sequence ids are ignored so that every sequence runs to its limit.
import { AdmissionQueue } from "../../../runtime/engine/admission-queue.js";
import { DecodeScheduler } from "../../../runtime/generation/decode-scheduler.js";
import type { DecoderSession } from "../../../runtime/generation/decoder-feeds.js";
import type { DecodeJob, Generated } from "../../../runtime/generation/generate.js";
import { chooseSampler } from "../../../runtime/generation/sampler.js";
import type { TextGenerator } from "../../../runtime/generation/text-generator.js";
import { loadModel } from "../../../runtime/model/load-model.js";
import { validateRequest } from "../../../api/validation.js";
import { mulberry32 } from "../../fixtures/prng.js";
import { fixtureFolder } from "../../runtime/support/runtime-server.js";
import { fmt, fmtRatio, median, quantile } from "../runtime/stats.js";

const quick = process.argv.includes("--quick");
const plan = quick
  ? { rounds: 4, interactive: 12, places: 2, batchTokens: 96, interactiveTokens: 16 }
  : { rounds: 6, interactive: 16, places: 4, batchTokens: 160, interactiveTokens: 16 };

interface Round {
  preempt: boolean;
  ttftMs: number[];
  /** Interactive request to its last token. */
  totalMs: number[];
  batchTokensPerSecond: number;
  /** Process CPU (user + system) per output token, batch and interactive. */
  cpuMsPerToken: number;
  preemptions: number;
  /** Mean sequences per decode step. */
  rowsPerStep: number;
  /** Mean session.run milliseconds per run (decode steps and prefills). */
  runMs: number;
  /** Mean cache positions fed per run: rows times the (padded) past length. */
  pastPositions: number;
}

function prompt(generator: TextGenerator, input: string, maxTokens: number): number[] {
  const validation = validateRequest({ model: "m", input, max_output_tokens: maxTokens });
  if (!validation.ok) throw new Error(validation.problem.message);
  return generator.prepare(validation.request).promptIds;
}

async function runRound(generator: TextGenerator, preempt: boolean, seed: number): Promise<Round> {
  const queue = new AdmissionQueue<DecodeJob, Generated>({ maxQueue: 64 });
  let preemptions = 0;
  let steps = 0;
  let stepRows = 0;
  let runs = 0;
  let runMs = 0;
  let pastPositions = 0;
  const pastName = generator.io.cache[0]!.pastName;
  const session: DecoderSession = {
    run: async (feeds, ...rest) => {
      const started = performance.now();
      const dims = feeds[pastName]?.dims ?? [0, 0, 0];
      try {
        return await generator.session.run(feeds, ...rest);
      } finally {
        runs++;
        runMs += performance.now() - started;
        pastPositions += dims[0]! * dims[2]!;
      }
    },
  };
  new DecodeScheduler(queue, session, generator.io, {
    maxBatch: plan.places,
    eosIds: new Set(),
    preemptBatch: preempt,
    onPreempt: () => preemptions++,
    onStep: (size) => {
      steps++;
      stepRows += size;
    },
  });
  const random = mulberry32(seed);
  const greedy = chooseSampler({ temperature: 0 }, random);
  const batchPrompt = prompt(generator, "Summarise this batch line about harbours.", 1);
  const interactivePrompt = prompt(generator, "A quick interactive question?", 1);

  let running = true;
  let batchTokens = 0;
  let interactiveTokens = 0;
  // Waits are woken by the batch's tokens, not polled: a polling loop would
  // take CPU from the decode on a shared machine.
  let waiter: { at: number; wake: () => void } | null = null;
  const untilBatchTokens = (at: number) =>
    batchTokens >= at
      ? Promise.resolve()
      : new Promise<void>((wake) => {
          waiter = { at, wake };
        });
  // Lengths vary (half to one and a half times batchTokens, the same draws on
  // both sides): sequences of one length started together would stay in
  // lockstep without preemption, with no padding between them, which real
  // batch lines do not.
  const lengths = mulberry32(seed + 7);
  const batchJob = (): DecodeJob => ({
    promptIds: batchPrompt,
    maxNewTokens: Math.round(plan.batchTokens * (0.5 + lengths())),
    sampler: greedy,
    onToken: () => {
      batchTokens++;
      if (waiter && batchTokens >= waiter.at) {
        waiter.wake();
        waiter = null;
      }
    },
  });
  const worker = async () => {
    while (running) await queue.submit(batchJob(), undefined, "batch");
  };
  const cpuStart = process.cpuUsage();
  const started = performance.now();
  const workers = Array.from({ length: plan.places }, worker);
  // Let every place fill before the first interactive request.
  await untilBatchTokens(plan.places * 4);

  const ttftMs: number[] = [];
  const totalMs: number[] = [];
  for (let i = 0; i < plan.interactive; i++) {
    // A pause of up to a batch sequence's life in steps, so arrivals land at every point of it.
    await untilBatchTokens(batchTokens + Math.floor(random() * plan.batchTokens * plan.places));
    const sent = performance.now();
    let first = 0;
    await queue.submit(
      {
        promptIds: interactivePrompt,
        maxNewTokens: plan.interactiveTokens,
        sampler: greedy,
        onToken: () => {
          interactiveTokens++;
          if (first === 0) first = performance.now();
        },
      },
      undefined,
      "interactive",
    );
    ttftMs.push(first - sent);
    totalMs.push(performance.now() - sent);
  }
  const seconds = (performance.now() - started) / 1000;
  const tokensAtStop = batchTokens;
  running = false;
  await Promise.all(workers);
  const cpu = process.cpuUsage(cpuStart);
  return {
    preempt,
    ttftMs,
    totalMs,
    batchTokensPerSecond: tokensAtStop / seconds,
    cpuMsPerToken: (cpu.user + cpu.system) / 1000 / (batchTokens + interactiveTokens),
    preemptions,
    rowsPerStep: stepRows / steps,
    runMs: runMs / runs,
    pastPositions: pastPositions / runs,
  };
}

async function main(): Promise<void> {
  const model = await loadModel({
    path: await fixtureFolder("bench-gpt"),
    overflow: "truncate",
    threads: 1,
  });
  if (model.task !== "text-generation") throw new Error(`bench-gpt loaded as ${model.task}`);
  const generator = model.generator;
  console.log(
    `bench-gpt, ${plan.places} decode places held by batch sequences of ${plan.batchTokens / 2} to ${(plan.batchTokens * 3) / 2} tokens; ` +
      `${plan.interactive} interactive requests of ${plan.interactiveTokens} tokens per round, ${plan.rounds} rounds alternating`,
  );
  // One round of each to warm up the session and the allocator; not counted.
  await runRound(generator, true, 1);
  await runRound(generator, false, 1);

  const rounds: Round[] = [];
  for (let r = 0; r < plan.rounds; r++) {
    // on, off, off, on, on, off, ...: both sides take each position equally often.
    const order = r % 2 === 0 ? [true, false] : [false, true];
    for (const preempt of order) {
      const round = await runRound(generator, preempt, 100 + r);
      rounds.push(round);
      console.log(
        `round ${r + 1} ${preempt ? "preempt" : "no-preempt"}: TTFT median ${fmt(median(round.ttftMs))} ms, ` +
          `p90 ${fmt(quantile(round.ttftMs, 0.9))} ms; batch ${fmt(round.batchTokensPerSecond)} tokens/s; ` +
          `${round.preemptions} preemptions; ${fmt(round.rowsPerStep)} rows per step; ${fmt(round.cpuMsPerToken)} ms CPU per token`,
      );
    }
  }
  const side = (preempt: boolean) => {
    const mine = rounds.filter((r) => r.preempt === preempt);
    return {
      ttft: median(mine.map((r) => median(r.ttftMs))),
      ttftP90: median(mine.map((r) => quantile(r.ttftMs, 0.9))),
      total: median(mine.map((r) => median(r.totalMs))),
      batch: median(mine.map((r) => r.batchTokensPerSecond)),
      cpu: median(mine.map((r) => r.cpuMsPerToken)),
      preemptions: median(mine.map((r) => r.preemptions)),
      rows: median(mine.map((r) => r.rowsPerStep)),
      runMs: median(mine.map((r) => r.runMs)),
      past: median(mine.map((r) => r.pastPositions)),
    };
  };
  const on = side(true);
  const off = side(false);
  console.log("");
  console.log("| medians over rounds | preemption | no preemption | ratio |");
  console.log("| --- | --- | --- | --- |");
  const row = (name: string, a: number, b: number) =>
    console.log(`| ${name} | ${fmt(a)} | ${fmt(b)} | ${fmtRatio(a / b)} |`);
  row("interactive time to first token, median (ms)", on.ttft, off.ttft);
  row("interactive time to first token, p90 (ms)", on.ttftP90, off.ttftP90);
  row("interactive request, whole (ms)", on.total, off.total);
  row("batch tokens per second", on.batch, off.batch);
  row("process CPU per output token (ms)", on.cpu, off.cpu);
  row("sequences per decode step", on.rows, off.rows);
  row("session.run per run (ms)", on.runMs, off.runMs);
  row("cache positions fed per run (rows x past length)", on.past, off.past);
  row("preemptions per round", on.preemptions, off.preemptions);
  await model.session.release();
}

await main();
