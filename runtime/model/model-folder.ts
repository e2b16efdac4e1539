import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { modelLoadError } from "../errors.js";

/**
 * A model folder in the Hugging Face / Optimum ONNX layout, or in the layout
 * onnxruntime-genai's model builder writes (`genai_config.json` beside
 * `model.onnx`), read once at start-up. Which layout a folder holds is read
 * from its files, never from its name. Everything the engine knows about a
 * model comes from these files and from the ONNX session's own metadata.
 */
export interface ModelFolder {
  path: string;
  onnxPath: string;
  config: Record<string, unknown>;
  generationConfig: Record<string, unknown> | null;
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** sentence-transformers `modules.json`, when the folder is laid out that way. */
  modules: Array<{ type: string; path: string }> | null;
  /** sentence-transformers pooling settings (`1_Pooling/config.json`). */
  pooling: Record<string, unknown> | null;
  /** sentence-transformers `sentence_bert_config.json` (its `max_seq_length`). */
  sentenceConfig: Record<string, unknown> | null;
  /** onnxruntime-genai's `genai_config.json`: the decoder's graph file, names and shapes. */
  genaiConfig: Record<string, unknown> | null;
  /** `chat_template.jinja`, where newer transformers releases keep the template. */
  chatTemplate: string | null;
}

/** Graph files tried in order when none is named; Optimum's names first. */
export const ONNX_CANDIDATES = [
  "onnx/model.onnx",
  "onnx/decoder_model_merged.onnx",
  "onnx/model_quantized.onnx",
  "onnx/decoder_model_merged_quantized.onnx",
  // transformers.js names its 4-bit exports so (rampart-pii ships only this one).
  "onnx/model_q4.onnx",
  "model.onnx",
];

async function readJson(path: string, what: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw modelLoadError(`cannot read ${what} at ${path}`, error);
  }
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new Error("not a JSON object");
    }
    return value as Record<string, unknown>;
  } catch (error) {
    throw modelLoadError(`${what} at ${path} is not a valid JSON object`, error);
  }
}

async function readOptionalJson(
  path: string,
  what: string,
): Promise<Record<string, unknown> | null> {
  return existsSync(path) ? readJson(path, what) : null;
}

export function pickOnnxFile(folder: string, explicit?: string): string | null {
  if (explicit) return existsSync(join(folder, explicit)) ? join(folder, explicit) : null;
  const found = ONNX_CANDIDATES.find((candidate) => existsSync(join(folder, candidate)));
  return found ? join(folder, found) : null;
}

/** The graph genai_config.json names, when the folder has one and names a file. */
function genaiGraphFile(genaiConfig: Record<string, unknown> | null): string | undefined {
  const model = genaiConfig?.model as { decoder?: { filename?: unknown } } | undefined;
  const filename = model?.decoder?.filename;
  return typeof filename === "string" && filename.length > 0 ? filename : undefined;
}

export async function readModelFolder(path: string, onnxFile?: string): Promise<ModelFolder> {
  if (!existsSync(path)) throw modelLoadError(`model folder ${path} does not exist`);
  const missing = ["config.json", "tokenizer.json"].filter((name) => !existsSync(join(path, name)));
  const genaiConfig = await readOptionalJson(join(path, "genai_config.json"), "genai_config.json");
  const onnxPath = pickOnnxFile(path, onnxFile ?? genaiGraphFile(genaiConfig));
  if (!onnxPath) missing.push(onnxFile ?? `an ONNX graph (${ONNX_CANDIDATES.join(", ")})`);
  if (missing.length > 0 || !onnxPath) {
    throw modelLoadError(`model folder ${path} is missing ${missing.join(", ")}`);
  }

  const modulesJson: unknown = existsSync(join(path, "modules.json"))
    ? JSON.parse(await readFile(join(path, "modules.json"), "utf8"))
    : null;
  const modules = Array.isArray(modulesJson)
    ? (modulesJson as Array<{ type: string; path: string }>)
    : null;
  const poolingModule = modules?.find((module) => module.type.endsWith(".Pooling"));

  return {
    path,
    onnxPath,
    config: await readJson(join(path, "config.json"), "config.json"),
    generationConfig: await readOptionalJson(
      join(path, "generation_config.json"),
      "generation_config.json",
    ),
    tokenizerJson: await readJson(join(path, "tokenizer.json"), "tokenizer.json"),
    tokenizerConfig:
      (await readOptionalJson(join(path, "tokenizer_config.json"), "tokenizer_config.json")) ?? {},
    modules,
    pooling: poolingModule
      ? await readOptionalJson(join(path, poolingModule.path, "config.json"), "pooling config")
      : null,
    sentenceConfig: await readOptionalJson(
      join(path, "sentence_bert_config.json"),
      "sentence_bert_config.json",
    ),
    genaiConfig,
    chatTemplate: existsSync(join(path, "chat_template.jinja"))
      ? await readFile(join(path, "chat_template.jinja"), "utf8")
      : null,
  };
}

/** A number from the first config that has it under any of the names. */
export function configNumber(
  configs: ReadonlyArray<Record<string, unknown> | null>,
  ...names: string[]
): number | undefined {
  for (const config of configs) {
    for (const name of names) {
      const value = config?.[name];
      if (typeof value === "number" && Number.isFinite(value)) return value;
    }
  }
  return undefined;
}
