import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as ort from "onnxruntime-node";

/**
 * (b) The limit we chase: greedy decoding as a bare loop of session.run on the
 * same graph with the same threads, and nothing else: no HTTP, no tokenizer,
 * no sampler objects. The prompt step feeds empty past tensors; each later
 * step feeds one token and the previous step's `present.*` as `past_key_values.*`.
 * This file imports onnxruntime-node itself on purpose: going through the
 * runtime's session wrapper would measure the thing under test.
 */
export interface BareRun {
  ids: number[];
  /** Milliseconds from the first session.run to the first argmax. */
  firstTokenMs: number;
  totalMs: number;
}

export interface BareLoop {
  generate(promptIds: readonly number[], newTokens: number): Promise<BareRun>;
  release(): Promise<void>;
}

export async function openBareLoop(modelFolder: string, threads: number): Promise<BareLoop> {
  const session = await ort.InferenceSession.create(join(modelFolder, "onnx", "model.onnx"), {
    executionProviders: ["cpu"],
    intraOpNumThreads: threads,
    graphOptimizationLevel: "all",
  });
  const config = JSON.parse(await readFile(join(modelFolder, "config.json"), "utf8")) as {
    n_head: number;
    n_embd: number;
  };
  const pastNames = session.inputNames.filter((n) => n.startsWith("past_key_values."));
  const heads = config.n_head;
  const headDim = config.n_embd / config.n_head;

  async function generate(promptIds: readonly number[], newTokens: number): Promise<BareRun> {
    const started = performance.now();
    const ids: number[] = [];
    let firstTokenMs = 0;
    let past: Record<string, ort.Tensor> = {};
    for (const name of pastNames) {
      past[name] = new ort.Tensor("float32", new Float32Array(0), [1, heads, 0, headDim]);
    }
    let fed: readonly number[] = promptIds;
    let pastLength = 0;
    for (let step = 0; step < newTokens; step++) {
      const length = pastLength + fed.length;
      const positions = new BigInt64Array(fed.length);
      for (let i = 0; i < fed.length; i++) positions[i] = BigInt(pastLength + i);
      const outputs = await session.run({
        input_ids: new ort.Tensor("int64", BigInt64Array.from(fed, BigInt), [1, fed.length]),
        attention_mask: new ort.Tensor("int64", new BigInt64Array(length).fill(1n), [1, length]),
        position_ids: new ort.Tensor("int64", positions, [1, fed.length]),
        ...past,
      });
      const token = argmaxLastRow(outputs.logits!);
      if (step === 0) firstTokenMs = performance.now() - started;
      ids.push(token);
      past = {};
      for (const name of pastNames)
        past[name] = outputs[name.replace("past_key_values.", "present.")]!;
      pastLength = length;
      fed = [token];
    }
    return { ids, firstTokenMs, totalMs: performance.now() - started };
  }

  return { generate, release: () => session.release() };
}

function argmaxLastRow(logits: ort.Tensor): number {
  const data = logits.data as Float32Array;
  const vocab = logits.dims[logits.dims.length - 1]!;
  const offset = data.length - vocab;
  let best = 0;
  for (let i = 1; i < vocab; i++) if (data[offset + i]! > data[offset + best]!) best = i;
  return best;
}
