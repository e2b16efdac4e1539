// Node side of the decode-step profile (step-profile.ts runs it in a child
// process): what one decode step of an onnxruntime-genai decoder costs
// through onnxruntime-node, split into its parts. Prints one JSON line.
//
//   tsx test/bench/runtime/step-costs.ts '{"model": ".../model.onnx", "threads": 2,
//        "pasts": [64, 512], "batch": 1, "steps": 40}'
//
// Every variant feeds one token per row after `past` cached positions, the
// same feeds each time, so variants differ only in what the binding does:
//   all        session.run(feeds): every output (logits and 60 presents) comes
//              back as a new JavaScript tensor
//   logits     session.run(feeds, ["logits"]): the graph still computes the
//              presents, the binding hands back only the logits
//   shared     past and present bound to one preallocated buffer (the
//              genai share-buffer layout) through `fetches`
//   hop        one setImmediate round trip (onnxruntime-node 1.30 runs the
//              model synchronously inside one)
//   feeds      creating the step's input tensors
//   argmax     greedy choice over one row of logits
// This file imports onnxruntime-node itself on purpose: it measures the
// binding, not the runtime's wrapper around it.
import * as ort from "onnxruntime-node";
import { sessionOptions } from "../../../runtime/engine/session.js";

interface Config {
  model: string;
  threads: number;
  pasts: number[];
  batch: number;
  steps: number;
  /** Key/value heads and head size of the cache (genai_config.json). */
  kvHeads: number;
  headDim: number;
}

export interface StepCosts {
  past: number;
  batch: number;
  /** Median milliseconds per call of each variant. */
  ms: Record<string, number>;
}

const config = JSON.parse(process.argv[2] ?? "{}") as Config;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function timed(steps: number, call: () => unknown): Promise<number> {
  await call();
  const times: number[] = [];
  for (let i = 0; i < steps; i++) {
    const started = performance.now();
    await call();
    times.push(performance.now() - started);
  }
  return median(times);
}

function argmax(row: Float32Array): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < row.length; i++) {
    if (row[i]! > bestValue) {
      bestValue = row[i]!;
      best = i;
    }
  }
  return best;
}

const session = await ort.InferenceSession.create(config.model, sessionOptions(config.threads));
const pastNames = session.inputNames.filter((n) => n.startsWith("past_key_values."));
const presentOf = (name: string) => name.replace("past_key_values.", "present.");
const { kvHeads: heads, headDim } = config;

async function measure(past: number, batch: number): Promise<StepCosts> {
  const feedsFor = (capacity: number): Record<string, ort.Tensor> => {
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor("int64", new BigInt64Array(batch).fill(100n), [batch, 1]),
      attention_mask: new ort.Tensor("int64", new BigInt64Array(batch * (past + 1)).fill(1n), [
        batch,
        past + 1,
      ]),
    };
    for (const name of pastNames) {
      feeds[name] = new ort.Tensor(
        "float32",
        new Float32Array(batch * heads * capacity * headDim),
        [batch, heads, capacity, headDim],
      );
    }
    return feeds;
  };
  const grow = feedsFor(past);
  const ms: Record<string, number> = {};
  ms.all = await timed(config.steps, () => session.run(grow));
  ms.logits = await timed(config.steps, () => session.run(grow, ["logits"]));
  for (const extra of [1, 64]) {
    const shared = feedsFor(past + extra);
    const fetches: Record<string, ort.Tensor | null> = { logits: null };
    for (const name of pastNames) fetches[presentOf(name)] = shared[name]!;
    ms[`shared capacity past+${extra}`] = await timed(config.steps, () =>
      session.run(shared, fetches),
    );
  }
  ms.hop = await timed(config.steps * 5, () => new Promise((resolve) => setImmediate(resolve)));
  ms.feeds = await timed(config.steps * 5, () => ({
    input_ids: new ort.Tensor("int64", BigInt64Array.from([100], BigInt), [1, 1]),
    attention_mask: new ort.Tensor("int64", new BigInt64Array(past + 1).fill(1n), [1, past + 1]),
  }));
  const logits = (await session.run(grow, ["logits"])).logits!.data as Float32Array;
  const vocab = logits.length / batch;
  ms.argmax = await timed(config.steps * 5, () => argmax(logits.subarray(0, vocab)));
  return { past, batch, ms };
}

const results: StepCosts[] = [];
for (const past of config.pasts) results.push(await measure(past, config.batch));
await session.release();
process.stdout.write(`${JSON.stringify(results)}\n`);
