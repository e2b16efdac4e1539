import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { sessionOptions } from "../../../runtime/engine/session.js";

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
  /**
   * Median time of one decode step for `batch` sequences, each feeding one
   * token after `pastLength` cached ones: what batched decoding costs per step,
   * against `batch` separate steps at batch 1.
   */
  stepMs(batch: number, pastLength: number, runs: number): Promise<number>;
  release(): Promise<void>;
}

export async function openBareLoop(
  modelFolder: string,
  threads: number,
  onnxFile = "onnx/model.onnx",
): Promise<BareLoop> {
  // Exactly the runtime's session options: the baseline differs only in having no server around it.
  const session = await ort.InferenceSession.create(
    join(modelFolder, onnxFile),
    sessionOptions(threads),
  );
  const pastNames = session.inputNames.filter((n) => n.startsWith("past_key_values."));
  const { heads, headDim } = await cacheShape(session, modelFolder);
  const hasPositions = session.inputNames.includes("position_ids");

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
        ...(hasPositions
          ? { position_ids: new ort.Tensor("int64", positions, [1, fed.length]) }
          : {}),
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

  async function stepMs(batch: number, pastLength: number, runs: number): Promise<number> {
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor("int64", new BigInt64Array(batch).fill(100n), [batch, 1]),
      attention_mask: new ort.Tensor(
        "int64",
        new BigInt64Array(batch * (pastLength + 1)).fill(1n),
        [batch, pastLength + 1],
      ),
    };
    if (hasPositions) {
      feeds.position_ids = new ort.Tensor(
        "int64",
        new BigInt64Array(batch).fill(BigInt(pastLength)),
        [batch, 1],
      );
    }
    const pastDims = [batch, heads, pastLength, headDim];
    const pastData = new Float32Array(batch * heads * pastLength * headDim);
    for (const name of pastNames) feeds[name] = new ort.Tensor("float32", pastData, pastDims);
    await session.run(feeds);
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await session.run(feeds);
      times.push(performance.now() - started);
    }
    return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
  }

  return { generate, stepMs, release: () => session.release() };
}

/**
 * Key/value heads and head size of the past tensors [batch, heads, past, headDim]:
 * from the graph's metadata when its dims are fixed numbers, else from
 * config.json (GPT-2 names, or Llama's, whose grouped-query attention keeps
 * fewer key/value heads than attention heads).
 */
async function cacheShape(
  session: ort.InferenceSession,
  folder: string,
): Promise<{ heads: number; headDim: number }> {
  const meta = session.inputMetadata.find((m) => m.name.startsWith("past_key_values."));
  const dims = meta?.isTensor ? meta.shape : [];
  if (typeof dims[1] === "number" && typeof dims[3] === "number") {
    return { heads: dims[1], headDim: dims[3] };
  }
  const config = JSON.parse(await readFile(join(folder, "config.json"), "utf8")) as Record<
    string,
    number | undefined
  >;
  const attentionHeads = config.num_attention_heads ?? config.n_head ?? 1;
  const hidden = config.hidden_size ?? config.n_embd ?? 0;
  return {
    heads: config.num_key_value_heads ?? attentionHeads,
    headDim: config.head_dim ?? hidden / attentionHeads,
  };
}

function argmaxLastRow(logits: ort.Tensor): number {
  const data = logits.data as Float32Array;
  const vocab = logits.dims[logits.dims.length - 1]!;
  const offset = data.length - vocab;
  let best = 0;
  for (let i = 1; i < vocab; i++) if (data[offset + i]! > data[offset + best]!) best = i;
  return best;
}
