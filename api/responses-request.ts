import { z } from "zod";

/**
 * The ResponsesRequest body of spec section 2.1: the one definition that the
 * gateway and the runtime validate against and the OpenAPI document is made of.
 */

export const METADATA_MAX_PAIRS = 16;
export const METADATA_KEY_MAX = 64;
export const METADATA_VALUE_MAX = 512;
export const CLASSIFIER_INPUT_MAX = 131072;
export const CLASSIFIER_CATEGORIES_MAX = 10;

/** Entity-extraction options that ride in `metadata`: consumed, never echoed. */
export const ENTITY_EXTRACTION_KEYS = [
  "usecase",
  "schema",
  "labels",
  "threshold",
  "mask",
  "replacement_char",
] as const;
const entityKeys: ReadonlySet<string> = new Set(ENTITY_EXTRACTION_KEYS);

export const metadataSchema = z
  .record(z.string(), z.unknown())
  .superRefine((value, ctx) => {
    const keys = Object.keys(value);
    if (keys.length > METADATA_MAX_PAIRS) {
      ctx.addIssue({
        code: "custom",
        message: `metadata has ${keys.length} pairs; at most ${METADATA_MAX_PAIRS} are allowed`,
      });
    }
    for (const key of keys) {
      const item = value[key];
      if (key.length > METADATA_KEY_MAX) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `metadata key is ${key.length} characters; at most ${METADATA_KEY_MAX} are allowed`,
        });
      }
      // Entity-extraction options may be structured (a schema, a label list).
      if (entityKeys.has(key)) continue;
      if (typeof item !== "string") {
        ctx.addIssue({ code: "custom", path: [key], message: "metadata values must be strings" });
      } else if (item.length > METADATA_VALUE_MAX) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `metadata value is ${item.length} characters; at most ${METADATA_VALUE_MAX} are allowed`,
        });
      }
    }
  })
  .describe("Up to 16 string key/value pairs, echoed in the response");

const textFormatSchema = z.looseObject({
  type: z.string().refine((type) => type === "text", {
    message: "only `text` is supported; `json` is currently rejected",
  }),
});

export const responsesRequestSchema = z.looseObject({
  model: z.string().min(1, "model must not be empty"),
  input: z.string().min(1, "input must not be empty"),
  instructions: z.string().optional(),
  max_output_tokens: z.number().int().min(1).nullable().optional(),
  parallel_tool_calls: z.boolean().default(true),
  previous_response_id: z.string().nullable().optional(),
  store: z.boolean().default(true),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  truncation: z.enum(["auto", "disabled"]).default("auto"),
  categories: z.array(z.string()).optional(),
  multilingual: z.boolean().optional(),
  metadata: metadataSchema.optional(),
  text: z.looseObject({ format: textFormatSchema.optional() }).optional(),
  // The OpenAI clients send `stream`; a stream is not something this API
  // answers with, so asking for one is refused instead of silently ignored.
  stream: z
    .boolean()
    .refine((stream) => !stream, "streaming is not supported; omit `stream` or set it to false")
    .nullable()
    .optional(),
});

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

export type ModelTask = "text-generation" | "zero-shot-classification";

/** The metadata to echo: everything but the consumed entity-extraction options. */
export function echoedMetadata(
  metadata: Record<string, unknown> | undefined,
): Record<string, string> {
  const echoed: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (!entityKeys.has(key) && typeof value === "string") echoed[key] = value;
  }
  return echoed;
}
