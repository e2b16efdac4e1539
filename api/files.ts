import { z } from "zod";

/**
 * The Files API, in the shape of OpenAI's (`/v1/files`), so that the
 * official clients work unchanged. A file belongs to the account and the
 * project (`x-project-id`, or none) of the key that uploaded it.
 */

/** Purposes a caller may upload; `batch_output` files are written by batches only. */
export const UPLOAD_PURPOSES = ["batch", "user_data"] as const;
export const FILE_PURPOSES = [...UPLOAD_PURPOSES, "batch_output"] as const;
export type FilePurpose = (typeof FILE_PURPOSES)[number];

/** OpenAI's bounds for an upload's `expires_after[seconds]`: one hour to thirty days. */
export const EXPIRES_AFTER_SECONDS = { min: 3600, max: 2_592_000 } as const;

/** Most bytes of one upload (OpenAI's batch input limit). */
export const MAX_FILE_BYTES = 200 * 1024 * 1024;
/** Most lines (requests) of a `batch` file: the spec's batch size. */
export const MAX_BATCH_LINES = 50_000;

export const fileIdSchema = z
  .string()
  .regex(/^file-[0-9a-f]{24}$/)
  .describe("A file id: `file-` and 24 hex digits");

export const fileObjectSchema = z
  .object({
    id: fileIdSchema,
    object: z.literal("file"),
    bytes: z.number().int().nonnegative(),
    created_at: z.number().int().describe("Unix seconds"),
    expires_at: z.number().int().nullable().describe("Unix seconds; null: kept until deleted"),
    filename: z.string(),
    purpose: z.enum(FILE_PURPOSES),
    status: z.literal("processed").describe("Deprecated in OpenAI's API; always `processed`"),
  })
  .describe("File");
export type FileObject = z.infer<typeof fileObjectSchema>;

export const fileDeletedSchema = z
  .object({ id: fileIdSchema, object: z.literal("file"), deleted: z.literal(true) })
  .describe("FileDeleted");

/** A cursor page, as OpenAI's list endpoints answer. */
export function listPageSchema<T extends z.ZodType>(item: T, name: string) {
  return z
    .object({
      object: z.literal("list"),
      data: z.array(item),
      first_id: z.string().nullable(),
      last_id: z.string().nullable(),
      has_more: z.boolean(),
    })
    .describe(name);
}

export const fileListSchema = listPageSchema(fileObjectSchema, "FileList");

/** Query parameters arrive as strings: `limit` is read as the integer it spells. */
const limitParam = (max: number, fallback: number) =>
  z.coerce.number().int().min(1).max(max).default(fallback);

export const fileListQuerySchema = z
  .object({
    after: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe("The id of the last file of the previous page"),
    limit: limitParam(10_000, 10_000).describe("Files per page, 1 to 10,000"),
    order: z.enum(["asc", "desc"]).default("desc").describe("By `created_at`"),
    purpose: z.enum(FILE_PURPOSES).optional(),
  })
  .strict();
export type FileListQuery = z.infer<typeof fileListQuerySchema>;

export const batchListQuerySchema = z
  .object({
    after: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe("The id of the last batch of the previous page"),
    limit: limitParam(100, 20).describe("Batches per page, 1 to 100"),
  })
  .strict();
export type BatchListQuery = z.infer<typeof batchListQuerySchema>;

/** The multipart form of an upload, as described in the OpenAPI document. */
export const fileUploadFormSchema = z
  .object({
    file: z.string().describe("The file's bytes (`format: binary`)").meta({ format: "binary" }),
    purpose: z.enum(UPLOAD_PURPOSES),
    "expires_after[anchor]": z
      .literal("created_at")
      .optional()
      .describe(
        "The only anchor, so it may be left out: `expires_after[seconds]` count from `created_at`",
      ),
    "expires_after[seconds]": z
      .int()
      .min(EXPIRES_AFTER_SECONDS.min)
      .max(EXPIRES_AFTER_SECONDS.max)
      .optional()
      .describe(
        "One hour to thirty days. Without these two fields a `batch` file expires after thirty days, any other is kept until deleted",
      ),
  })
  // Other fields are refused with a 400 naming them (gateway/batch/files.routes.ts).
  .strict()
  .describe("FileUpload");
