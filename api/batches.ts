import { z } from "zod";
import { EXPIRES_AFTER_SECONDS, fileIdSchema } from "./files.js";
import { responsesUsageSchema } from "./responses-response.js";

/**
 * The Batch API, in the shape of OpenAI's (`/v1/batches`): a `batch` file of
 * requests to `/v1/responses`, run within a completion window, its results
 * in an output file and its failures in an error file.
 */
export const BATCH_ENDPOINTS = ["/v1/responses"] as const;
export const COMPLETION_WINDOWS = ["24h"] as const;

/** A batch's statuses, as OpenAI's Batch object has them; the store keeps the same. */
export const BATCH_STATUSES = [
  "validating",
  "failed",
  "in_progress",
  "finalizing",
  "completed",
  "expired",
  "cancelling",
  "cancelled",
] as const;

export const batchIdSchema = z
  .string()
  .regex(/^batch_[0-9a-f]{24}$/)
  .describe("A batch id: `batch_` and 24 hex digits");

/** At most 16 pairs, keys up to 64 characters, values up to 512 (as the Responses request's). */
export const batchMetadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((value) => Object.keys(value).length <= 16, "must have at most 16 keys");

export const createBatchRequestSchema = z
  .object({
    input_file_id: z.string().min(1).max(64).describe("A file uploaded with purpose `batch`"),
    endpoint: z.enum(BATCH_ENDPOINTS),
    completion_window: z.enum(COMPLETION_WINDOWS),
    metadata: batchMetadataSchema.nullable().optional(),
    output_expires_after: z
      .object({
        anchor: z.literal("created_at").describe("The output file's creation: the only anchor"),
        seconds: z
          .number()
          .int()
          .min(EXPIRES_AFTER_SECONDS.min)
          .max(EXPIRES_AFTER_SECONDS.max)
          .describe("One hour to thirty days"),
      })
      .strict()
      .optional()
      .describe("How long the output and error files are kept (default: thirty days)"),
  })
  .strict()
  .describe("CreateBatchRequest");
export type CreateBatchRequest = z.infer<typeof createBatchRequestSchema>;

export const batchErrorSchema = z.object({
  code: z.string(),
  message: z.string(),
  param: z.string().nullable(),
  line: z.number().int().nullable().describe("1-based line of the input file"),
});
export type BatchError = z.infer<typeof batchErrorSchema>;

const seconds = z.number().int().nullable().describe("Unix seconds");

export const batchObjectSchema = z
  .object({
    id: batchIdSchema,
    object: z.literal("batch"),
    endpoint: z.enum(BATCH_ENDPOINTS),
    errors: z.object({ object: z.literal("list"), data: z.array(batchErrorSchema) }).nullable(),
    input_file_id: fileIdSchema,
    completion_window: z.enum(COMPLETION_WINDOWS),
    status: z.enum(BATCH_STATUSES),
    output_file_id: fileIdSchema.nullable(),
    error_file_id: fileIdSchema.nullable(),
    created_at: z.number().int(),
    in_progress_at: seconds,
    expires_at: seconds,
    finalizing_at: seconds,
    completed_at: seconds,
    failed_at: seconds,
    expired_at: seconds,
    cancelling_at: seconds,
    cancelled_at: seconds,
    request_counts: z.object({
      total: z.number().int().nonnegative(),
      completed: z.number().int().nonnegative(),
      failed: z.number().int().nonnegative(),
    }),
    metadata: z.record(z.string(), z.string()).nullable(),
    model: z
      .string()
      .optional()
      .describe("The one model every line names; absent until the input file is validated"),
    usage: responsesUsageSchema.describe(
      "The tokens of the completed lines so far, summed as each line's response reports them",
    ),
  })
  .describe("Batch");
export type BatchObject = z.infer<typeof batchObjectSchema>;

/** One line of a batch input file. */
export const batchInputLineSchema = z
  .object({
    // Kept as text, which cannot hold a NUL (PostgreSQL's text type).
    custom_id: z
      .string()
      .min(1)
      .max(512)
      .refine((id) => !id.includes("\u0000"), "must not contain a NUL character"),
    method: z.literal("POST"),
    url: z.string(),
    body: z.record(z.string(), z.unknown()),
  })
  .strict();
export type BatchInputLine = z.infer<typeof batchInputLineSchema>;

/** One line of an output or error file. */
export interface BatchOutputLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
}
