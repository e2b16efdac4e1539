import { z } from "zod";
import { paramMessages } from "./param-messages.js";

/**
 * The usage and cost endpoints (`GET /v1/organization/usage/completions`,
 * `GET /v1/organization/costs`), in the shape of OpenAI's usage API where it
 * fits: the query parameters are the same names with the same meaning, and
 * the answer is a page of time buckets, each with one result per group.
 * Ours add `route` and, for admin keys, `account_id` as groups and filters,
 * and the page's `totals` over the whole requested range (docs/usage.md).
 *
 * The schemas are of the query as typed values (numbers, lists): the raw
 * query string is brought to them by `typedQuery`, so that the OpenAPI
 * document describes exactly what is accepted.
 */

/** 9999-12-31T23:59:59Z: the last second a `timestamptz` and a JavaScript Date both hold. */
export const MAX_UNIX_SECONDS = 253_402_300_799;

export const BUCKET_WIDTHS = { "1m": 60, "1h": 3600, "1d": 86_400 } as const;
export type BucketWidth = keyof typeof BUCKET_WIDTHS;

/** Buckets of a page by default, per width, as OpenAI's usage API. */
export const DEFAULT_LIMITS: Record<BucketWidth, number> = { "1m": 60, "1h": 24, "1d": 7 };
/** Buckets of a page at most (a day of minutes). */
export const MAX_LIMIT = 1440;

const unixSeconds = z.number().int().min(0).max(MAX_UNIX_SECONDS);

/** Printable ASCII: a value the ledger's `text` columns can compare (never a NUL). */
const id = z.string().regex(/^[\x21-\x7e]{1,256}$/, "must be 1-256 printable ASCII characters");
const ids = z.array(id).min(1).max(100);

/** `page_<unix seconds>`: where the next page starts, as `next_page` gives it. */
export const pageCursor = z
  .string()
  .regex(/^page_[0-9]{1,12}$/, "must be a next_page value of an earlier answer");

export const COMPLETIONS_GROUPS = [
  "model",
  "project_id",
  "api_key_id",
  "route",
  "account_id",
] as const;
export type CompletionsGroup = (typeof COMPLETIONS_GROUPS)[number];

export const COST_GROUPS = ["project_id", "line_item", "account_id"] as const;
export type CostGroup = (typeof COST_GROUPS)[number];

const commonQuery = {
  start_time: unixSeconds.describe("Start of the range (Unix seconds), inclusive."),
  end_time: unixSeconds
    .optional()
    .describe("End of the range (Unix seconds), exclusive; default now."),
  project_ids: ids.optional().describe("Only these projects."),
  account_ids: ids
    .optional()
    .describe("Only these accounts. Admin keys only: another key is refused with 403."),
  page: pageCursor.optional().describe("The `next_page` of the previous page."),
};

export const completionsUsageQuerySchema = z
  .object({
    ...commonQuery,
    bucket_width: z
      .enum(["1m", "1h", "1d"])
      .default("1d")
      .describe("Width of each bucket; buckets start on multiples of it (UTC)."),
    group_by: z
      .array(z.enum(COMPLETIONS_GROUPS))
      .optional()
      .describe("Split each bucket's results by these fields; `account_id` for admin keys only."),
    models: ids.optional().describe("Only these models."),
    api_key_ids: ids.optional().describe("Only these API keys."),
    limit: z
      .number()
      .int()
      .min(1)
      .max(MAX_LIMIT)
      .optional()
      .describe("Buckets per page; default 7 (1d), 24 (1h) or 60 (1m)."),
  })
  .strict();
export type CompletionsUsageQuery = z.infer<typeof completionsUsageQuerySchema>;

export const costsQuerySchema = z
  .object({
    ...commonQuery,
    bucket_width: z.enum(["1d"]).default("1d").describe("Width of each bucket: one day (UTC)."),
    group_by: z
      .array(z.enum(COST_GROUPS))
      .optional()
      .describe(
        "Split each bucket's results by these fields (`line_item` is the model); `account_id` for admin keys only.",
      ),
    limit: z.number().int().min(1).max(180).optional().describe("Buckets per page; default 7."),
  })
  .strict();
export type CostsQuery = z.infer<typeof costsQuerySchema>;

const nullableId = z.string().nullable();

export const completionsResultSchema = z.object({
  object: z.literal("organization.usage.completions.result"),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  /** Always 0: the ledger does not record the runtime's prefix-cache hits yet. */
  input_cached_tokens: z.number().int(),
  num_model_requests: z.number().int(),
  project_id: nullableId,
  api_key_id: nullableId,
  model: nullableId,
  route: nullableId,
  account_id: nullableId,
});
export type CompletionsResult = z.infer<typeof completionsResultSchema>;

export const costsResultSchema = z.object({
  object: z.literal("organization.costs.result"),
  amount: z.object({
    /** The sum in the currency; exactly as `value_decimal`, which keeps every digit. */
    value: z.number(),
    value_decimal: z.string(),
    /** ISO 4217, lower case as OpenAI writes it. */
    currency: z.string(),
  }),
  line_item: nullableId,
  project_id: nullableId,
  account_id: nullableId,
});
export type CostsResult = z.infer<typeof costsResultSchema>;

function pageSchema<R extends z.ZodType, T extends z.ZodType>(result: R, totals: T) {
  return z.object({
    object: z.literal("page"),
    data: z.array(
      z.object({
        object: z.literal("bucket"),
        start_time: z.number().int(),
        end_time: z.number().int(),
        results: z.array(result),
      }),
    ),
    has_more: z.boolean(),
    next_page: pageCursor.nullable(),
    /** Over the whole requested range and filters, not only this page. */
    totals,
  });
}

export const completionsUsagePageSchema = pageSchema(
  completionsResultSchema,
  completionsResultSchema,
).describe("A page of completions usage buckets");
export type CompletionsUsagePage = z.infer<typeof completionsUsagePageSchema>;

export const costsPageSchema = pageSchema(costsResultSchema, z.array(costsResultSchema)).describe(
  "A page of cost buckets",
);
export type CostsPage = z.infer<typeof costsPageSchema>;

/** A query problem: the parameter it names and what is wrong. */
export interface QueryProblem {
  param: string;
  message: string;
}

type Shape = Record<string, z.ZodType>;

function kindOf(schema: z.ZodType): string {
  let def = schema._zod.def as { type: string; innerType?: z.ZodType };
  while ((def.type === "optional" || def.type === "default") && def.innerType) {
    def = def.innerType._zod.def;
  }
  return def.type;
}

/**
 * The raw query (as the HTTP server parsed it: a string per name, an array
 * when a name repeats) brought to the schema's types: a list parameter takes
 * `name=a&name=b` and `name[]=a&name[]=b` alike (the two forms clients
 * send), an integer parameter its decimal digits. What does not convert is
 * left as it came, for the schema to refuse with its own message.
 */
export function typedQuery(raw: Record<string, unknown>, shape: Shape): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [rawName, value] of Object.entries(raw)) {
    const name = rawName.endsWith("[]") ? rawName.slice(0, -2) : rawName;
    const schema = shape[name];
    const kind = schema ? kindOf(schema) : "unknown";
    if (kind === "array") {
      const prior = out[name];
      const items: unknown[] = Array.isArray(value) ? (value as unknown[]) : [value];
      out[name] = Array.isArray(prior) ? [...(prior as unknown[]), ...items] : items;
    } else if (kind === "number" && typeof value === "string" && /^-?[0-9]{1,16}$/.test(value)) {
      out[name] = Number(value);
    } else {
      out[rawName === name || !(name in shape) ? rawName : name] = value;
    }
  }
  return out;
}

/** Parses a query with one of the schemas above; the first problem names its parameter. */
export function parseQuery<S extends z.ZodObject>(
  schema: S,
  raw: Record<string, unknown>,
): { ok: true; query: z.infer<S> } | { ok: false; problem: QueryProblem } {
  // A one-value parameter sent twice is named as such, not as "received array".
  for (const [name, value] of Object.entries(raw)) {
    const field = schema.shape[name] as z.ZodType | undefined;
    if (Array.isArray(value) && field && kindOf(field) !== "array") {
      return { ok: false, problem: { param: name, message: paramMessages.repeated(name) } };
    }
  }
  const parsed = schema.safeParse(typedQuery(raw, schema.shape));
  if (parsed.success) return { ok: true, query: parsed.data };
  const issue = parsed.error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const param = issue.keys[0]!;
    return { ok: false, problem: { param, message: `Unknown query parameter '${param}'.` } };
  }
  const param = issue.path.length > 0 ? String(issue.path[0]) : "query";
  const where = issue.path.map(String).join(".");
  return { ok: false, problem: { param, message: `Invalid '${where}': ${issue.message}.` } };
}
