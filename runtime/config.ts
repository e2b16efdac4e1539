import { basename } from "node:path";
import { z } from "zod";
import { parseSettings } from "../lib/settings.js";
import { DEFAULT_THROUGHPUT } from "./model-service.js";

/**
 * `modelgate runtime serve` settings: flags first, then MODELGATE_* variables
 * (what the operator sets on the pod), then defaults. Parsed once, with zod,
 * so a bad value stops start-up with the setting's name in the message.
 */
const positiveInt = z.coerce.number().int().positive();

export const serveConfigSchema = z.object({
  modelPath: z
    .string()
    .min(1, "the model folder is required (--model-path or MODELGATE_MODEL_PATH)"),
  modelId: z.string().min(1).optional(),
  onnxFile: z.string().optional(),
  task: z.enum(["text-generation", "zero-shot-classification", "entity-extraction"]).optional(),
  zeroShotMethod: z.enum(["nli", "similarity"]).optional(),
  maxTokens: positiveInt.optional(),
  overflow: z.enum(["truncate", "error"]).default("truncate"),
  threads: positiveInt.optional(),
  host: z.string().default("0.0.0.0"),
  port: z.coerce.number().int().min(0).max(65535).default(8080),
  maxBatchSize: positiveInt.default(DEFAULT_THROUGHPUT.maxBatchSize),
  batchWindowMs: z.coerce.number().min(0).default(DEFAULT_THROUGHPUT.batchWindowMs),
  generationConcurrency: positiveInt.default(DEFAULT_THROUGHPUT.generationConcurrency),
  maxQueue: positiveInt.default(DEFAULT_THROUGHPUT.maxQueue),
  kvCacheTokens: positiveInt.optional(),
  prefixCacheBytes: z.coerce
    .number()
    .int()
    .min(0)
    .default(DEFAULT_THROUGHPUT.prefixCacheBytes ?? 0),
  prefillChunkTokens: positiveInt.optional(),
  hypothesisTemplate: z
    .string()
    .refine((t) => t.includes("{}"), "the hypothesis template needs a {} for the label")
    .optional(),
  similarityMidpoint: z.coerce.number().min(-1).max(1).optional(),
  similaritySteepness: z.coerce.number().positive().max(1000).optional(),
  logLevel: z.string().default("info"),
});

export type ServeConfig = z.infer<typeof serveConfigSchema> & { modelId: string };

export function parseServeConfig(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): ServeConfig {
  const settings = parseSettings(serveConfigSchema, flags, env);
  const modelId = settings.modelId ?? basename(settings.modelPath.replace(/\/+$/, ""));
  return { ...settings, modelId };
}
