import * as ort from "onnxruntime-node";

/**
 * The only module that imports onnxruntime-node. Everything above it speaks in
 * plain typed arrays and the small `Tensor` shape below, so the engine can be
 * read without the ORT API in mind.
 */

export type TensorType = "float32" | "int64" | "float16" | "int32" | "bool" | "uint8" | "int8";

export interface TensorData {
  type: TensorType;
  data: Float32Array | BigInt64Array | Int32Array | Uint8Array | Int8Array | Uint16Array;
  dims: readonly number[];
}

export interface ValueInfo {
  name: string;
  type: string;
  /** Symbolic dims are strings, fixed ones numbers; empty when unknown. */
  shape: ReadonlyArray<number | string>;
}

export interface SessionOptions {
  intraOpThreads: number;
  /**
   * onnxruntime's CPU memory arena (default on). It keeps the high-water mark
   * of every run's buffers. An onnxruntime-genai decoder is as fast without
   * it (per-token times within noise of each other, in alternating runs) and
   * smaller: peak 1,474 against 1,685 MiB at sixteen 545-token sequences,
   * since its outputs leave the arena anyway and its largest buffers (a long
   * prompt's logits) are needed once.
   */
  cpuArena?: boolean | undefined;
}

/**
 * The session options every model is served with. Exported so that
 * benchmarks measure their baselines with exactly the same settings.
 */
export function sessionOptions(
  intraOpThreads: number,
  cpuArena = true,
): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    intraOpNumThreads: intraOpThreads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    enableCpuMemArena: cpuArena,
    enableMemPattern: true,
    // Spinning intra-op threads keep cores busy between runs; on a pod's
    // few cores that time belongs to the event loop serving HTTP.
    extra: { session: { intra_op: { allow_spinning: "0" } } },
  };
}

export class ModelSession {
  readonly inputs: readonly ValueInfo[];
  readonly outputs: readonly ValueInfo[];

  private constructor(private readonly session: ort.InferenceSession) {
    this.inputs = session.inputMetadata.map(toValueInfo);
    this.outputs = session.outputMetadata.map(toValueInfo);
  }

  static async open(path: string, options: SessionOptions): Promise<ModelSession> {
    const session = await ort.InferenceSession.create(
      path,
      sessionOptions(options.intraOpThreads, options.cpuArena ?? true),
    );
    return new ModelSession(session);
  }

  input(name: string): ValueInfo | undefined {
    return this.inputs.find((info) => info.name === name);
  }

  /**
   * One model run. `outputNames` limits the outputs handed back; `bound`
   * gives outputs whose memory the graph writes into (a KV cache whose past
   * and present are one buffer). onnxruntime-node 1.30 still hands every
   * fetched output back as a fresh copy, bound ones included: their cost is
   * that copy, and callers keep using their own buffers.
   */
  async run(
    feeds: Record<string, TensorData>,
    outputNames?: readonly string[],
    bound?: Readonly<Record<string, TensorData>>,
  ): Promise<Record<string, TensorData>> {
    const ortFeeds: Record<string, ort.Tensor> = {};
    for (const [name, tensor] of Object.entries(feeds)) {
      ortFeeds[name] = new ort.Tensor(tensor.type, tensor.data, tensor.dims);
    }
    let results: ort.InferenceSession.ReturnType;
    if (bound) {
      const fetches: Record<string, ort.Tensor | null> = {};
      for (const name of outputNames ?? this.session.outputNames) fetches[name] = null;
      for (const [name, tensor] of Object.entries(bound)) {
        fetches[name] = new ort.Tensor(tensor.type, tensor.data, tensor.dims);
      }
      results = await this.session.run(ortFeeds, fetches);
    } else {
      results = outputNames
        ? await this.session.run(ortFeeds, outputNames)
        : await this.session.run(ortFeeds);
    }
    const out: Record<string, TensorData> = {};
    for (const [name, value] of Object.entries(results)) {
      out[name] = {
        type: value.type as TensorType,
        data: value.data as TensorData["data"],
        dims: value.dims,
      };
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

function toValueInfo(meta: ort.InferenceSession.ValueMetadata): ValueInfo {
  if (!meta.isTensor) return { name: meta.name, type: "non-tensor", shape: [] };
  return { name: meta.name, type: meta.type, shape: meta.shape };
}

export function int64Tensor(values: BigInt64Array, dims: readonly number[]): TensorData {
  return { type: "int64", data: values, dims };
}

export function float32Tensor(values: Float32Array, dims: readonly number[]): TensorData {
  return { type: "float32", data: values, dims };
}
