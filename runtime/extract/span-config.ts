import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { modelLoadError } from "../errors.js";
import type { ValueInfo } from "../engine/session.js";

/**
 * What a GLiNER span model's folder says about itself: `gliner_config.json`
 * (span sizes, prompt markers, word splitter) and the ONNX export's inputs.
 */
export const GLINER_CONFIG_FILE = "gliner_config.json";

/** The public GLiNER ONNX export in span mode takes exactly these. */
export const SPAN_INPUTS = [
  "input_ids",
  "attention_mask",
  "words_mask",
  "text_lengths",
  "span_idx",
  "span_mask",
] as const;
export const SPAN_OUTPUT = "logits";

export interface SpanConfig {
  /** Longest span in words; the logits' third axis. */
  maxWidth: number;
  /** Most words the model reads at once; longer texts go in overlapping windows. */
  maxLen: number;
  entToken: string;
  sepToken: string;
}

/** A folder with gliner_config.json holds a GLiNER checkpoint. */
export function hasSpanConfig(folder: string): boolean {
  return existsSync(join(folder, GLINER_CONFIG_FILE));
}

/** A session is a span model when it takes span_idx; the method is read from the graph. */
export function isSpanSession(inputs: readonly ValueInfo[]): boolean {
  return inputs.some((input) => input.name === "span_idx");
}

export function checkSpanSignature(
  where: string,
  inputs: readonly ValueInfo[],
  outputs: readonly ValueInfo[],
): void {
  const names = new Set(inputs.map((input) => input.name));
  const missing: string[] = SPAN_INPUTS.filter((name) => !names.has(name));
  if (!outputs.some((output) => output.name === SPAN_OUTPUT))
    missing.push(`output '${SPAN_OUTPUT}'`);
  if (missing.length > 0) {
    throw modelLoadError(
      `${where}: a GLiNER span model needs inputs ${SPAN_INPUTS.join(", ")} and output '${SPAN_OUTPUT}'; missing ${missing.join(", ")}`,
    );
  }
}

export async function readSpanConfig(folder: string): Promise<SpanConfig> {
  const path = join(folder, GLINER_CONFIG_FILE);
  if (!existsSync(path)) {
    throw modelLoadError(
      `${folder}: a span model needs ${GLINER_CONFIG_FILE} (max_width, max_len)`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path, "utf8"));
  } catch (error) {
    throw modelLoadError(`${path} is not valid JSON`, error);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw modelLoadError(`${path} is not a JSON object`);
  }
  const config = raw as Record<string, unknown>;
  const positive = (key: string): number => {
    const value = config[key];
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
      throw modelLoadError(
        `${path}: ${key} must be a positive integer; got ${JSON.stringify(value)}`,
      );
    }
    return value;
  };
  const token = (key: string, fallback: string): string => {
    const value = config[key] ?? fallback;
    if (typeof value !== "string" || value.length === 0) {
      throw modelLoadError(`${path}: ${key} must be a token string; got ${JSON.stringify(value)}`);
    }
    return value;
  };
  // Other splitters (spacy, stanza, mecab, jieba) cut words differently; offsets would not match.
  const splitter = config.words_splitter_type ?? "whitespace";
  if (splitter !== "whitespace") {
    throw modelLoadError(
      `${path}: words_splitter_type ${JSON.stringify(splitter)} is not supported; only "whitespace"`,
    );
  }
  // GLiNER's token-level models ("token_level" span_mode) give per-token logits, not spans.
  if (config.span_mode === "token_level") {
    throw modelLoadError(`${path}: span_mode "token_level" is not supported; only span models`);
  }
  return {
    maxWidth: positive("max_width"),
    maxLen: positive("max_len"),
    // GLiNER's defaults when a checkpoint's config leaves them out.
    entToken: token("ent_token", "<<ENT>>"),
    sepToken: token("sep_token", "<<SEP>>"),
  };
}
