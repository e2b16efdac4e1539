import { z } from "zod";
import { modelLoadError } from "../errors.js";

/**
 * `genai_config.json`, as onnxruntime-genai's model builder writes it for a
 * decoder-only model (Llama, Mistral, Phi, Qwen, Gemma): the graph file, its
 * input and output names (cache names as `%d` patterns over the layers), the
 * head counts, the context length and the special ids. Only what the runtime
 * uses is read; other fields pass through.
 */
const IdList = z.union([z.number().int(), z.array(z.number().int())]);

const GenaiConfigSchema = z.object({
  model: z.object({
    context_length: z.number().int().positive(),
    eos_token_id: IdList.optional(),
    pad_token_id: IdList.optional(),
    vocab_size: z.number().int().positive().optional(),
    decoder: z.object({
      filename: z.string().min(1),
      head_size: z.number().int().positive(),
      num_hidden_layers: z.number().int().positive(),
      num_key_value_heads: z.number().int().positive(),
      num_attention_heads: z.number().int().positive().optional(),
      inputs: z.object({
        input_ids: z.string().default("input_ids"),
        attention_mask: z.string().optional(),
        position_ids: z.string().optional(),
        past_key_names: z.string(),
        past_value_names: z.string(),
      }),
      outputs: z.object({
        logits: z.string().default("logits"),
        present_key_names: z.string(),
        present_value_names: z.string(),
      }),
    }),
  }),
  search: z
    .object({
      past_present_share_buffer: z.boolean().optional(),
      max_length: z.number().int().positive().optional(),
    })
    .optional(),
});

export interface GenaiDecoder {
  /** The graph file, relative to the folder. */
  filename: string;
  inputIds: string;
  attentionMask: string | null;
  positionIds: string | null;
  logits: string;
  /** Per layer, the past input and present output names of keys and values. */
  cache: Array<{ pastName: string; presentName: string }>;
  kvHeads: number;
  headDim: number;
  contextLength: number;
  eosIds: number[];
  /** The builder's statement that past and present may share one buffer. */
  shareBuffer: boolean;
}

export function parseGenaiConfig(raw: unknown, path: string): GenaiDecoder {
  const parsed = GenaiConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw modelLoadError(
      `${path}/genai_config.json: ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`,
    );
  }
  const { model, search } = parsed.data;
  const { decoder } = model;
  const layer = (pattern: string, i: number) => pattern.replace("%d", String(i));
  const cache: GenaiDecoder["cache"] = [];
  for (let i = 0; i < decoder.num_hidden_layers; i++) {
    cache.push({
      pastName: layer(decoder.inputs.past_key_names, i),
      presentName: layer(decoder.outputs.present_key_names, i),
    });
    cache.push({
      pastName: layer(decoder.inputs.past_value_names, i),
      presentName: layer(decoder.outputs.present_value_names, i),
    });
  }
  const eos = model.eos_token_id;
  return {
    filename: decoder.filename,
    inputIds: decoder.inputs.input_ids,
    attentionMask: decoder.inputs.attention_mask ?? null,
    positionIds: decoder.inputs.position_ids ?? null,
    logits: decoder.outputs.logits,
    cache,
    kvHeads: decoder.num_key_value_heads,
    headDim: decoder.head_size,
    contextLength: model.context_length,
    eosIds: eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
    shareBuffer: search?.past_present_share_buffer ?? false,
  };
}
