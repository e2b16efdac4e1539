import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateRequest } from "../../../api/validation.js";
import { AdmissionQueue, type Priority } from "../../../runtime/engine/admission-queue.js";
import { DecodeScheduler } from "../../../runtime/generation/decode-scheduler.js";
import type { DecoderSession } from "../../../runtime/generation/decoder-feeds.js";
import type { DecodeJob, Generated } from "../../../runtime/generation/generate.js";
import { chooseSampler, type SamplingSettings } from "../../../runtime/generation/sampler.js";
import type { TextGenerator } from "../../../runtime/generation/text-generator.js";
import { loadModel, type LoadedModel } from "../../../runtime/model/load-model.js";
import { mulberry32 } from "../../fixtures/prng.js";
import { fixtureFolder } from "../support/runtime-server.js";

/**
 * When the decode scheduler starts a newcomer, on real ONNX sessions: one
 * that arrived during another's prefill is prefilled before the next decode
 * step. Preemption: an interactive
 * sequence that arrives while every decode place holds a batch sequence
 * starts at the next step boundary, and the batch sequence that made way
 * resumes to exactly the tokens it produces when nothing preempts it.
 * End-of-sequence ids are left out so that every sequence runs to its
 * output limit, whatever the fixture's random weights prefer.
 */
type Event =
  { kind: "step"; size: number } | { kind: "preempt" } | { kind: "token"; who: string; id: number };

interface Seq {
  who: string;
  input: string;
  maxTokens: number;
  priority: Priority;
  sampling?: SamplingSettings & { seed: number };
}

const A: Seq = {
  who: "A",
  input: "A long batch line about ships and harbours",
  maxTokens: 60,
  priority: "batch",
};
const B: Seq = {
  who: "B",
  input: "Another batch line, on rivers",
  maxTokens: 60,
  priority: "batch",
};
const I: Seq = { who: "I", input: "Quick question", maxTokens: 8, priority: "interactive" };
const sampled = (seq: Seq, seed: number): Seq => ({
  ...seq,
  sampling: { temperature: 0.8, topP: 0.95, seed },
});

class Harness {
  readonly events: Event[] = [];
  readonly queue = new AdmissionQueue<DecodeJob, Generated>({ maxQueue: 16 });
  readonly scheduler: DecodeScheduler;

  constructor(
    private readonly generator: TextGenerator,
    maxBatch: number,
    maxCacheTokens?: number,
    session: DecoderSession = generator.session,
  ) {
    this.scheduler = new DecodeScheduler(this.queue, session, generator.io, {
      maxBatch,
      maxCacheTokens,
      eosIds: new Set(),
      onStep: (size) => this.events.push({ kind: "step", size }),
      onPreempt: () => this.events.push({ kind: "preempt" }),
    });
  }

  /** Cache positions the sequence reserves: its prompt plus its output limit. */
  reservation(seq: Seq): number {
    const prepared = this.prepare(seq);
    return prepared.promptIds.length + prepared.maxNewTokens;
  }

  private prepare(seq: Seq) {
    const validation = validateRequest({
      model: "m",
      input: seq.input,
      max_output_tokens: seq.maxTokens,
    });
    if (!validation.ok) throw new Error(validation.problem.message);
    return this.generator.prepare(validation.request);
  }

  submit(seq: Seq, signal?: AbortSignal): Promise<Generated> {
    const prepared = this.prepare(seq);
    const settings = seq.sampling ?? { temperature: 0 };
    const job: DecodeJob = {
      promptIds: prepared.promptIds,
      maxNewTokens: prepared.maxNewTokens,
      sampler: chooseSampler(settings, mulberry32(seq.sampling?.seed ?? 1)),
      onToken: (id) => this.events.push({ kind: "token", who: seq.who, id }),
    };
    return this.queue.submit(job, signal, seq.priority);
  }

  steps(from = 0, to = this.events.length): number {
    return this.events.slice(from, to).filter((e) => e.kind === "step").length;
  }

  /** Waits (yielding to the decode loop) until `count` steps have run. */
  async untilSteps(count: number): Promise<void> {
    while (this.steps() < count) await new Promise((resolve) => setImmediate(resolve));
  }

  streamed(who: string): number[] {
    return this.events.flatMap((e) => (e.kind === "token" && e.who === who ? [e.id] : []));
  }

  indexOfToken(who: string, nth: number): number {
    let seen = 0;
    return this.events.findIndex((e) => e.kind === "token" && e.who === who && seen++ === nth);
  }

  lastToken(who: string): number {
    return this.events.findLastIndex((e) => e.kind === "token" && e.who === who);
  }

  preemptions(): number {
    return this.events.filter((e) => e.kind === "preempt").length;
  }
}

for (const fixture of ["tiny-gpt", "tiny-genai"] as const) {
  describe(`preempting batch sequences for interactive ones (${fixture})`, () => {
    let model: LoadedModel;
    let generator: TextGenerator;

    beforeAll(async () => {
      model = await loadModel({
        path: await fixtureFolder(fixture),
        overflow: "truncate",
        threads: 1,
      });
      if (model.task !== "text-generation") throw new Error(`${fixture} loaded as ${model.task}`);
      generator = model.generator;
    });
    afterAll(async () => model?.session.release());

    /** Two batch sequences alone on two places, then the same with an interactive one arriving mid-way. */
    async function scenario(a: Seq, b: Seq) {
      const alone = new Harness(generator, 2);
      const [aloneA, aloneB] = await Promise.all([alone.submit(a), alone.submit(b)]);
      expect(alone.preemptions()).toBe(0);

      const h = new Harness(generator, 2);
      const runA = h.submit(a);
      const runB = h.submit(b);
      await h.untilSteps(10);
      const arrivedAt = h.events.length;
      const [gotA, gotB, gotI] = await Promise.all([runA, runB, h.submit(I)]);
      return { alone, aloneA, aloneB, h, gotA, gotB, gotI, arrivedAt };
    }

    it("starts an interactive sequence at the next step boundary, and the batch outputs are the ones they are unpreempted (greedy)", async () => {
      const { aloneA, aloneB, h, gotA, gotB, gotI, arrivedAt } = await scenario(A, B);

      // Both places held batch sequences when I arrived; the younger one (B) made way.
      expect(h.preemptions()).toBe(1);
      const firstI = h.indexOfToken("I", 0);
      // I's first token comes from its prefill, right after the step in flight when it arrived.
      expect(h.steps(arrivedAt, firstI)).toBeLessThanOrEqual(1);
      // Then one token of I per step, beside A; B is parked meanwhile.
      const lastI = h.lastToken("I");
      expect(h.steps(firstI, lastI)).toBe(I.maxTokens - 1);
      const during = h.events.slice(firstI, lastI);
      expect(during.some((e) => e.kind === "token" && e.who === "B")).toBe(false);
      expect(during.filter((e) => e.kind === "token" && e.who === "A").length).toBe(
        I.maxTokens - 1,
      );
      // B resumed once I left, and ran to its end.
      expect(h.indexOfToken("B", gotB.ids.length - 1)).toBeGreaterThan(lastI);

      // Token for token what they are unpreempted; streamed once each.
      expect(gotA.ids).toEqual(aloneA.ids);
      expect(gotB.ids).toEqual(aloneB.ids);
      expect(gotA.ids).toHaveLength(A.maxTokens);
      expect(gotB.ids).toHaveLength(B.maxTokens);
      expect(h.streamed("A")).toEqual(gotA.ids);
      expect(h.streamed("B")).toEqual(gotB.ids);
      expect(h.streamed("I")).toEqual(gotI.ids);
      expect([gotA.stopReason, gotB.stopReason, gotI.stopReason]).toEqual([
        "length",
        "length",
        "length",
      ]);
      // I's output is what it is alone too.
      const solo = new Harness(generator, 2);
      expect((await solo.submit(I)).ids).toEqual(gotI.ids);
    });

    it("resumes a seeded sampled batch sequence with its sampler's state: the same tokens as unpreempted", async () => {
      const { aloneA, aloneB, h, gotA, gotB } = await scenario(sampled(A, 11), sampled(B, 12));
      expect(h.preemptions()).toBe(1);
      expect(gotA.ids).toEqual(aloneA.ids);
      expect(gotB.ids).toEqual(aloneB.ids);
      expect(h.streamed("B")).toEqual(gotB.ids);
      // Sampling, not greedy: the seeds make a difference.
      const other = new Harness(generator, 2);
      const reseeded = await other.submit(sampled(B, 99));
      expect(reseeded.ids).not.toEqual(gotB.ids);
    });

    it("preempts for the KV cache budget too, when places are free but the batch's reservations fill it", async () => {
      const probe = new Harness(generator, 4);
      // Room for the two batch sequences and not a third row as long (both
      // cache layouts pad every row to the longest, the shared one in chunks of 32).
      const longest = Math.max(probe.reservation(A), probe.reservation(B));
      const budget = 2 * Math.ceil((longest + 1) / 32) * 32 + 16;
      const alone = new Harness(generator, 4, budget);
      const [aloneA, aloneB] = await Promise.all([alone.submit(A), alone.submit(B)]);
      expect(alone.preemptions()).toBe(0);

      const h = new Harness(generator, 4, budget);
      const runA = h.submit(A);
      const runB = h.submit(B);
      await h.untilSteps(10);
      const arrivedAt = h.events.length;
      const [gotA, gotB] = await Promise.all([runA, runB, h.submit(I)]);
      expect(h.preemptions()).toBe(1);
      expect(h.steps(arrivedAt, h.indexOfToken("I", 0))).toBeLessThanOrEqual(1);
      expect(gotA.ids).toEqual(aloneA.ids);
      expect(gotB.ids).toEqual(aloneB.ids);
    });

    it("prefills a request that arrived while another's prefill held the event loop before the next decode step", async () => {
      // onnxruntime-node runs a session from a setImmediate; an immediate
      // queued right after the first run's stands for a request read from its
      // socket once that run is over, in the same turn of the loop.
      let arrive: (() => void) | null = null;
      const session: DecoderSession = {
        run: (...args: Parameters<DecoderSession["run"]>) => {
          const ran = generator.session.run(...args);
          const next = arrive;
          arrive = null;
          if (next) setImmediate(next);
          return ran;
        },
      };
      const h = new Harness(generator, 2, undefined, session);
      const late: Promise<Generated>[] = [];
      arrive = () => late.push(h.submit({ ...I, who: "J" }));
      const first = await h.submit(I);
      expect(late).toHaveLength(1);
      await Promise.all(late);
      // J was prefilled before the first decode step: every step ran both.
      const sizes = h.events.flatMap((e) => (e.kind === "step" ? [e.size] : []));
      expect(sizes[0]).toBe(2);
      expect(h.indexOfToken("J", 0)).toBeLessThan(h.indexOfToken("I", 1));
      expect(first.ids).toHaveLength(I.maxTokens);
    });

    it("never preempts an interactive sequence: neither for a batch one nor for another interactive one", async () => {
      const h = new Harness(generator, 2);
      const long = { ...I, maxTokens: 30 };
      const first = h.submit({ ...long, who: "I1" });
      const second = h.submit({ ...long, who: "I2" });
      await h.untilSteps(5);
      const late = [
        h.submit({ ...A, who: "B1", maxTokens: 5 }),
        h.submit({ ...I, who: "I3", maxTokens: 5 }),
      ];
      await Promise.all([first, second, ...late]);
      expect(h.preemptions()).toBe(0);
      const firstDone = Math.min(h.lastToken("I1"), h.lastToken("I2"));
      expect(h.indexOfToken("I3", 0)).toBeGreaterThan(firstDone);
      expect(h.indexOfToken("B1", 0)).toBeGreaterThan(firstDone);
      // The waiting interactive one went first.
      expect(h.indexOfToken("B1", 0)).toBeGreaterThan(h.indexOfToken("I3", 0));
    });

    it("settles a parked batch sequence at once when its caller goes away, with the tokens it had", async () => {
      const alone = new Harness(generator, 2);
      const [, aloneB] = await Promise.all([alone.submit(A), alone.submit(B)]);

      const h = new Harness(generator, 2);
      const controller = new AbortController();
      const runA = h.submit(A);
      const runB = h.submit(B, controller.signal);
      await h.untilSteps(5);
      const runI = h.submit({ ...I, maxTokens: 20 });
      while (h.indexOfToken("I", 1) < 0) await new Promise((resolve) => setImmediate(resolve));
      expect(h.preemptions()).toBe(1);
      controller.abort();
      const gotB = await runB;
      // Settled while I still runs: B did not wait to resume.
      expect(h.streamed("I").length).toBeLessThan(20);
      expect(gotB.stopReason).toBe("aborted");
      expect(gotB.ids.length).toBeGreaterThan(0);
      expect(gotB.ids).toEqual(aloneB.ids.slice(0, gotB.ids.length));
      expect(h.streamed("B")).toEqual(gotB.ids);
      await Promise.all([runA, runI]);
      expect(h.queue.inFlight).toBe(0);
    });
  });
}
