import { z } from "zod";
import {
  chatMessagesOf,
  conversationText,
  inputItemsSchema,
  type ChatMessage,
} from "./input-items.js";
import {
  CANDIDATE_LABELS_MAX,
  LABEL_LIST_PATTERN,
  SINGLE_LABEL_PATTERN,
} from "./candidate-labels.js";
import {
  ENTITY_LABEL_LIST_PATTERN,
  ENTITY_LABELS_MAX,
  LABEL_PLACEHOLDER,
  REPLACEMENT_PATTERN,
  SCHEMA_MAX_LENGTH,
  THRESHOLD_PATTERN,
  USECASE_NAMES,
  USECASES,
  parseExtractionOptions,
} from "./entity-options.js";

/**
 * The ResponsesRequest body of spec section 2.1, per task: the one
 * definition that the gateway and the runtime validate against and that the
 * OpenAPI document is generated from. Every rule is one the JSON Schema
 * output can state (a `pattern`, a `maxLength`, an `enum`), so the document
 * says exactly what is accepted: a request the document calls valid is
 * never refused for its shape, and one it calls invalid is never served.
 */

export const METADATA_MAX_PAIRS = 16;
export const METADATA_KEY_MAX = 64;
export const METADATA_VALUE_MAX = 512;
export const CLASSIFIER_INPUT_MAX = 131072;
export const CLASSIFIER_CATEGORIES_MAX = CANDIDATE_LABELS_MAX;
/**
 * The largest `max_output_tokens` accepted, and so the largest a response
 * can echo (the response schema declares the same bound). No model comes
 * near it: the runtime stops at the model's own limit first.
 */
export const MAX_OUTPUT_TOKENS_CAP = 2_147_483_647;

export type ModelTask = "text-generation" | "zero-shot-classification" | "entity-extraction";
export const MODEL_TASKS: readonly ModelTask[] = [
  "text-generation",
  "zero-shot-classification",
  "entity-extraction",
];

/**
 * Entity-extraction options that ride in `metadata`: strings like every
 * metadata value (`"0.7"`, `"true"`, a JSON-encoded schema), parsed by the
 * model that reads them, consumed and never echoed. They are exempt from the
 * 512-character value limit, since a schema can be longer.
 */
export const ENTITY_EXTRACTION_KEYS = [
  "usecase",
  "schema",
  "labels",
  "threshold",
  "mask",
  "replacement_char",
] as const;
const entityKeys: ReadonlySet<string> = new Set(ENTITY_EXTRACTION_KEYS);

/**
 * JSON Schema counts a string's length in code points, JavaScript in UTF-16
 * units: an emoji is 1 to one and 2 to the other. The bound is checked in
 * code points, as the document states it; strings no longer than the bound
 * in UTF-16 units (nearly all) are not counted at all.
 */
function atMostCodePoints(base: z.ZodString, max: number, message: (length: number) => string) {
  return base
    .superRefine((value, ctx) => {
      if (value.length <= max) return;
      const length = codePointLength(value);
      if (length > max) ctx.addIssue({ code: "custom", message: message(length) });
    })
    .meta({ maxLength: max });
}

export function codePointLength(value: string): number {
  let length = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    length++;
  }
  return length;
}

const metadataValue = atMostCodePoints(
  z.string(),
  METADATA_VALUE_MAX,
  (n) => `metadata value is ${n} characters; at most ${METADATA_VALUE_MAX} are allowed`,
);

const entityOptions = Object.fromEntries(
  ENTITY_EXTRACTION_KEYS.map((key) => [key, z.string().optional()]),
) as Record<(typeof ENTITY_EXTRACTION_KEYS)[number], z.ZodOptional<z.ZodString>>;

/** The pair-count and key-length rules every task's metadata follows. */
function checkPairs(value: Record<string, unknown>, ctx: z.RefinementCtx): void {
  {
    const keys = Object.keys(value);
    if (keys.length > METADATA_MAX_PAIRS) {
      ctx.addIssue({
        code: "custom",
        message: `metadata has ${keys.length} pairs; at most ${METADATA_MAX_PAIRS} are allowed`,
      });
    }
    for (const key of keys) {
      const length = codePointLength(key);
      if (length > METADATA_KEY_MAX) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `metadata key is ${length} characters; at most ${METADATA_KEY_MAX} are allowed`,
        });
      }
    }
  }
}

const METADATA_SHAPE = {
  maxProperties: METADATA_MAX_PAIRS,
  propertyNames: { maxLength: METADATA_KEY_MAX, not: { const: "__proto__" } },
};

/**
 * Up to 16 pairs of string keys (1 to 64 characters; `__proto__` is
 * reserved, since assigning it sets a prototype instead of a pair) and
 * string values.
 */
export const metadataSchema = z
  .object(entityOptions)
  .catchall(metadataValue)
  .superRefine(checkPairs)
  .meta({
    maxProperties: METADATA_MAX_PAIRS,
    propertyNames: { maxLength: METADATA_KEY_MAX, not: { const: "__proto__" } },
    description:
      "Up to 16 string key/value pairs (keys up to 64 characters, values up to 512), echoed in the response; the entity-extraction options (usecase, schema, labels, threshold, mask, replacement_char) are consumed, not echoed",
  });

const textFormatSchema = z.looseObject({
  type: z.enum(["text"], {
    error: "only `text` is supported; `json` is currently rejected, as is any other value",
  }),
});

/**
 * The OpenAI API takes `null` for an optional field as not given, and its
 * clients send it so (Python's `instructions=None`): here too, the field's
 * default then applies. Declared nullable, so the OpenAPI document says so.
 */
function absentIfNull<T extends z.ZodType>(schema: T) {
  return schema
    .nullable()
    .transform((value) => value ?? undefined)
    .optional();
}
function defaultIfNull<T extends z.ZodType>(schema: T, fallback: z.util.NoUndefined<z.output<T>>) {
  return schema
    .nullable()
    .default(fallback)
    .transform((value): z.output<T> => value ?? fallback);
}

/** The fields every task shares. */
const commonShape = {
  model: z.string().min(1, "model must not be empty"),
  input: z
    .union([z.string().min(1, "input must not be empty"), inputItemsSchema], {
      error: "input must be a string or a list of message items",
    })
    .meta({
      description:
        "A string, or (text generation) a list of message items as the OpenAI clients send a conversation: `role` user, assistant, system or developer, `content` a string or text parts",
    }),
  instructions: absentIfNull(z.string()),
  // The cap first: a number past it (1e300) is refused with the cap, not
  // with zod's safe-integer bound, which is not this field's.
  max_output_tokens: z
    .number()
    .max(MAX_OUTPUT_TOKENS_CAP, `must be at most ${MAX_OUTPUT_TOKENS_CAP}`)
    .int()
    .min(1)
    .nullable()
    .optional(),
  parallel_tool_calls: defaultIfNull(z.boolean(), true),
  previous_response_id: z.string().nullable().optional(),
  // The OpenAI API's Conversations objects are not served here, so no id can
  // name one; a loose object would drop it and answer without the turns the
  // caller meant, a wrong answer with no word of why.
  conversation: z
    .null({
      error:
        "conversation objects are not served here; continue a conversation with `previous_response_id`",
    })
    .optional()
    .meta({
      description:
        "Not served here: only absent or null. A conversation continues with `previous_response_id`",
    }),
  // No model here calls tools or fills prompt templates. Dropped by the
  // loose object, they would be answered with plain text: an agent waiting
  // for its function call would never get one. Refused, as the OpenAI API
  // refuses a parameter a model does not support; the empty forms pass.
  tools: z
    .array(z.unknown())
    .max(0, "tools are not served here: these models answer with text only")
    .nullable()
    .optional()
    .meta({ description: "Not served here: only absent, null or empty" }),
  tool_choice: z
    .enum(["none", "auto"], {
      error: "no tools are served here, so no tool call can be required: send `none` or `auto`",
    })
    .nullable()
    .optional()
    .meta({ description: "Only `none` or `auto`: no tools are served here" }),
  prompt: z
    .null({ error: "prompt templates are not served here; send `instructions` and `input`" })
    .optional()
    .meta({ description: "Not served here: only absent or null" }),
  store: defaultIfNull(z.boolean(), true),
  temperature: z.number().min(0).max(2).nullable().optional(),
  // 0 to 1 as the OpenAI API takes it: 0 keeps only the most probable token.
  top_p: z.number().min(0).max(1).nullable().optional(),
  truncation: defaultIfNull(z.enum(["auto", "disabled"]), "auto"),
  categories: z.array(z.string()).optional(),
  multilingual: z.boolean().optional(),
  metadata: absentIfNull(metadataSchema),
  text: absentIfNull(z.looseObject({ format: textFormatSchema.optional() })),
  // True answers text/event-stream with the Responses API's events (api/stream-events.ts).
  stream: z.boolean().nullable().optional(),
};

/**
 * Text generation: the general ResponsesRequest. A list `input` becomes
 * `input_messages` (the turns, for the chat template) with `input` their
 * joined text, so that every reader of `input` still reads a string. The
 * field is always set from `input`: a client cannot send its own.
 */
export const textGenerationRequestSchema = z
  .looseObject(commonShape)
  .transform(({ input, ...rest }) => {
    const messages = typeof input === "string" ? null : chatMessagesOf(input);
    const out: typeof rest & { input: string; input_messages?: ChatMessage[] } = {
      ...rest,
      input: messages ? conversationText(messages) : (input as string),
    };
    // A loose object keeps unknown keys: one the client named so is dropped, not trusted.
    delete out.input_messages;
    if (messages) out.input_messages = messages;
    return out;
  });

/**
 * `stream` for a task whose answer is one object known all at once (a
 * classifier's scores, extracted entities): there is nothing to stream, so
 * `true` is a 400 naming `stream` (docs/streaming.md).
 */
export const answersInOnePiece = z
  .literal([false], {
    error: "this model answers in one piece; omit `stream` or set it to false",
  })
  .nullable()
  .optional();

const singleLabel = z
  .string()
  .regex(SINGLE_LABEL_PATTERN, "each category is one label: no commas, brackets or edge quotes");
const labelList = z
  .string()
  .regex(
    LABEL_LIST_PATTERN,
    `must be 1 to ${CLASSIFIER_CATEGORIES_MAX} comma-separated labels, optionally in brackets`,
  );

const LABELS_HELP = `give 0 to ${CLASSIFIER_CATEGORIES_MAX} single labels, or one comma-separated list of 1 to ${CLASSIFIER_CATEGORIES_MAX} labels, optionally in brackets ("[sports, politics]")`;

/**
 * The classifier variant (spec 2.1 and 8): input of 1 to 131072 characters
 * and 1 to 10 candidate labels, from `categories` or, when that is empty or
 * absent, from `instructions`.
 */
export const classificationRequestSchema = z
  .looseObject({
    ...commonShape,
    input: atMostCodePoints(
      z.string().min(1, "input must not be empty"),
      CLASSIFIER_INPUT_MAX,
      (n) => `${n} characters; a classifier takes 1 to ${CLASSIFIER_INPUT_MAX}`,
    ),
    categories: z
      .union([z.array(singleLabel).max(CLASSIFIER_CATEGORIES_MAX), z.tuple([labelList])], {
        error: LABELS_HELP,
      })
      .optional(),
    stream: answersInOnePiece,
  })
  // Plain objects: each side keeps only the keys it checks, so a field the
  // left side turns into its default (a null `store`, say) meets no raw
  // copy of itself here, which zod could not merge.
  .and(
    z.union(
      [
        z.object({ categories: z.array(z.string()).min(1) }),
        z.object({
          categories: z.array(z.string()).max(0).optional(),
          instructions: labelList,
        }),
      ],
      {
        error: `Missing candidate labels: send 'categories' or a comma-separated or bracketed list of 1 to ${CLASSIFIER_CATEGORIES_MAX} labels in 'instructions'.`,
      },
    ),
  );

/**
 * An entity-extraction model's metadata: the options are read, each with the
 * pattern or values it takes; the rules between them (and the `schema`
 * string's JSON) are checked by parseExtractionOptions.
 */
const extractionMetadataSchema = z
  .object({
    usecase: z
      .enum(USECASE_NAMES, { error: `must be one of ${USECASE_NAMES.join(", ")}` })
      .optional(),
    labels: z
      .string()
      .regex(
        ENTITY_LABEL_LIST_PATTERN,
        `must be 1 to ${ENTITY_LABELS_MAX} comma-separated labels, optionally in brackets ("[EMAIL, PHONE]")`,
      )
      .optional(),
    threshold: z
      .string()
      .regex(THRESHOLD_PATTERN, 'must be a number from 0 to 1, such as "0.5"')
      .optional()
      .meta({
        description: "A number from 0 to 1 (default 0.5): entities scoring below it are dropped",
      }),
    mask: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).optional(),
    replacement_char: z
      .string()
      .regex(
        REPLACEMENT_PATTERN,
        `must be one character (not whitespace or a control character), or "${LABEL_PLACEHOLDER}"`,
      )
      .optional()
      .meta({
        description: `With mask: one character repeated to each entity's length (default "*"), or "${LABEL_PLACEHOLDER}" for a placeholder per entity such as [EMAIL]`,
      }),
    schema: z
      .string()
      .max(SCHEMA_MAX_LENGTH, `must be at most ${SCHEMA_MAX_LENGTH} characters`)
      .optional()
      .meta({
        description:
          'A JSON object of field names to entity types ({"email": "EMAIL", "names": ["GIVEN_NAME"]}); the answer is then that object filled in',
      }),
  })
  .catchall(metadataValue)
  .superRefine((value, ctx) => {
    checkPairs(value, ctx);
    const parsed = parseExtractionOptions(value);
    if (!parsed.ok)
      ctx.addIssue({ code: "custom", path: [parsed.problem.key], message: parsed.problem.message });
  })
  .meta({
    ...METADATA_SHAPE,
    // The rules between options, as JSON Schema states them (parseExtractionOptions applies them).
    allOf: [
      { not: { required: ["schema", "labels"] } },
      { not: { required: ["schema", "usecase"] } },
      { if: { required: ["schema"] }, then: { properties: { mask: { const: "false" } } } },
      {
        if: { required: ["replacement_char"] },
        then: {
          anyOf: [
            { required: ["mask"], properties: { mask: { const: "true" } } },
            {
              required: ["usecase"],
              not: { required: ["mask"] },
              properties: {
                usecase: { enum: USECASE_NAMES.filter((name) => USECASES[name].mask) },
              },
            },
          ],
        },
      },
    ],
    description:
      "Up to 16 string key/value pairs, echoed in the response; the entity-extraction options (usecase, schema, labels, threshold, mask, replacement_char) are read and not echoed",
  });

/**
 * The entity-extraction variant: input of 1 to 131072 characters, the
 * options in `metadata` (api/entity-options.ts).
 */
export const entityExtractionRequestSchema = z.looseObject({
  ...commonShape,
  input: atMostCodePoints(
    z.string().min(1, "input must not be empty"),
    CLASSIFIER_INPUT_MAX,
    (n) => `${n} characters; an entity extractor takes 1 to ${CLASSIFIER_INPUT_MAX}`,
  ),
  metadata: absentIfNull(extractionMetadataSchema),
  stream: answersInOnePiece,
});

/** `input_messages`: set when `input` was a list of message items (the turns, in order). */
export type ResponsesRequest = z.infer<typeof textGenerationRequestSchema>;

/** The request schema of a task: what a request for a model of that task must be. */
export function requestSchemaFor(task: ModelTask): z.ZodType<ResponsesRequest> {
  const schemas: Record<ModelTask, z.ZodType> = {
    "text-generation": textGenerationRequestSchema,
    "zero-shot-classification": classificationRequestSchema,
    "entity-extraction": entityExtractionRequestSchema,
  };
  return schemas[task] as z.ZodType<ResponsesRequest>;
}

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
