import { modelLoadError } from "../errors.js";
import { configNumber, type ModelFolder } from "../model/model-folder.js";
import type { ValueInfo } from "../engine/session.js";

/**
 * The input and output names and cache shapes of a decoder graph, read from
 * the session's metadata and config.json. Nothing about a particular model is
 * written down here.
 */
export interface CacheEntry {
  pastName: string;
  presentName: string;
}

export interface DecoderIO {
  inputIds: string;
  attentionMask: string | null;
  positionIds: string | null;
  logits: string;
  /** Empty when the graph has no KV cache: the whole sequence is fed each step. */
  cache: CacheEntry[];
  kvHeads: number;
  headDim: number;
  vocabSize: number;
}

const PAST = /^past_key_values\.(\d+)\.(key|value)$/;

export function readDecoderIO(
  inputs: readonly ValueInfo[],
  outputs: readonly ValueInfo[],
  folder: Pick<ModelFolder, "config" | "path">,
): DecoderIO {
  const has = (list: readonly ValueInfo[], name: string) => list.some((v) => v.name === name);
  if (!has(inputs, "input_ids")) {
    throw modelLoadError(`${folder.path}: the graph has no 'input_ids' input; not a decoder`);
  }
  const logits = outputs.find((v) => v.name === "logits") ?? outputs[0];
  if (!logits || logits.name !== "logits") {
    throw modelLoadError(`${folder.path}: the graph has no 'logits' output; not a causal LM`);
  }

  const pastInputs = inputs.filter((v) => PAST.test(v.name));
  const cache: CacheEntry[] = pastInputs.map((past) => {
    const presentName = past.name.replace(/^past_key_values\./, "present.");
    if (!has(outputs, presentName)) {
      throw modelLoadError(
        `${folder.path}: input '${past.name}' has no matching output '${presentName}'`,
      );
    }
    if (past.type !== "float32") {
      throw modelLoadError(
        `${folder.path}: cache tensors of type ${past.type} are not supported (float32 only)`,
      );
    }
    return { pastName: past.name, presentName };
  });
  const unsupported = inputs.filter(
    (v) => !["input_ids", "attention_mask", "position_ids"].includes(v.name) && !PAST.test(v.name),
  );
  if (unsupported.length > 0) {
    throw modelLoadError(
      `${folder.path}: unsupported decoder inputs ${unsupported.map((v) => v.name).join(", ")}`,
    );
  }

  const config = [folder.config];
  const heads = configNumber(config, "num_attention_heads", "n_head");
  const hidden = configNumber(config, "hidden_size", "n_embd");
  const shape = pastInputs[0]?.shape ?? [];
  const kvHeads = numberOr(shape[1]) ?? configNumber(config, "num_key_value_heads") ?? heads ?? 0;
  const headDim =
    numberOr(shape[3]) ??
    configNumber(config, "head_dim") ??
    (hidden && heads ? hidden / heads : 0);
  const vocabSize = numberOr(logits.shape[2]) ?? configNumber(config, "vocab_size") ?? 0;
  if (cache.length > 0 && (!kvHeads || !headDim)) {
    throw modelLoadError(
      `${folder.path}: cannot tell the cache shape (key/value heads, head size) from the graph or config.json`,
    );
  }

  return {
    inputIds: "input_ids",
    attentionMask: has(inputs, "attention_mask") ? "attention_mask" : null,
    positionIds: has(inputs, "position_ids") ? "position_ids" : null,
    logits: logits.name,
    cache,
    kvHeads,
    headDim,
    vocabSize,
  };
}

function numberOr(dim: number | string | undefined): number | undefined {
  return typeof dim === "number" && dim > 0 ? dim : undefined;
}
