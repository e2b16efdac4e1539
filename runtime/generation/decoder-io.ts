import { modelLoadError } from "../errors.js";
import { parseGenaiConfig } from "../model/genai-config.js";
import { configNumber, type ModelFolder } from "../model/model-folder.js";
import type { ValueInfo } from "../engine/session.js";

/**
 * The input and output names and cache shapes of a decoder graph, read from
 * the session's metadata and config.json, or from genai_config.json for a
 * folder in onnxruntime-genai's layout. Nothing about a particular model is
 * written down here.
 */
export interface CacheEntry {
  pastName: string;
  presentName: string;
}

/**
 * Where a row's cached positions sit. `padded` (Optimum exports): at the END
 * of the cache, rows left-padded, the mask hiding the padding, positions fed
 * as `position_ids`. `aligned` (onnxruntime-genai's GroupQueryAttention): at
 * the START, the graph taking each row's positions from its mask's sum.
 */
export type CacheLayout = "padded" | "aligned";

export interface DecoderIO {
  layout: CacheLayout;
  /**
   * The graph may read and write the cache in one buffer shared by past and
   * present (genai_config.json's `past_present_share_buffer`).
   */
  shareBuffer: boolean;
  /** End-of-sequence ids the folder's genai_config.json names (others come from generation_config.json). */
  eosIds: number[];
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
  folder: Pick<ModelFolder, "config" | "path"> & Partial<Pick<ModelFolder, "genaiConfig">>,
): DecoderIO {
  if (folder.genaiConfig) return readGenaiIO(inputs, outputs, folder.genaiConfig, folder);
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
    layout: "padded",
    shareBuffer: false,
    eosIds: [],
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

/**
 * onnxruntime-genai's layout: names and shapes from genai_config.json, checked
 * against the graph. Its GroupQueryAttention takes each row's positions from
 * the attention mask (no position_ids) and reads the cache from the start of
 * each row.
 */
function readGenaiIO(
  inputs: readonly ValueInfo[],
  outputs: readonly ValueInfo[],
  raw: Record<string, unknown>,
  folder: Pick<ModelFolder, "config" | "path">,
): DecoderIO {
  const genai = parseGenaiConfig(raw, folder.path);
  const has = (list: readonly ValueInfo[], name: string | null) =>
    name === null || list.some((v) => v.name === name);
  const missing = [
    ...[genai.inputIds, genai.attentionMask, genai.positionIds]
      .concat(genai.cache.map((c) => c.pastName))
      .filter((name) => !has(inputs, name)),
    ...[genai.logits, ...genai.cache.map((c) => c.presentName)].filter((n) => !has(outputs, n)),
  ];
  if (missing.length > 0) {
    throw modelLoadError(
      `${folder.path}: genai_config.json names ${missing.slice(0, 4).join(", ")}, which the graph does not have`,
    );
  }
  if (!genai.attentionMask) {
    throw modelLoadError(
      `${folder.path}: genai_config.json names no attention_mask; its graphs take positions from it`,
    );
  }
  const past = inputs.find((v) => v.name === genai.cache[0]?.pastName);
  if (past && past.type !== "float32") {
    throw modelLoadError(
      `${folder.path}: cache tensors of type ${past.type} are not supported (float32 only)`,
    );
  }
  const logits = outputs.find((v) => v.name === genai.logits);
  return {
    layout: "aligned",
    shareBuffer: genai.shareBuffer,
    eosIds: genai.eosIds,
    inputIds: genai.inputIds,
    attentionMask: genai.attentionMask,
    positionIds: genai.positionIds,
    logits: genai.logits,
    cache: genai.cache,
    kvHeads: genai.kvHeads,
    headDim: genai.headDim,
    vocabSize: numberOr(logits?.shape[2]) ?? configNumber([folder.config], "vocab_size") ?? 0,
  };
}
