import { z } from "zod";

/**
 * One metered request on the API-key route, as sent to the usage sink. The
 * `request_id` is also the record's idempotency key: one request is billed
 * once however often the record is delivered. `time` is when the gateway
 * finished the request (RFC 3339, UTC).
 */
export const UsageRecordSchema = z
  .object({
    request_id: z.string().min(1),
    account: z.string().min(1),
    /** The `x-project-id` the request was scoped to; null when it named none. */
    project: z.string().min(1).nullable(),
    model: z.string().min(1),
    input_tokens: z.number().int().nonnegative(),
    output_tokens: z.number().int().nonnegative(),
    time: z.iso.datetime({ offset: true }),
  })
  .strict();

export type UsageRecord = z.infer<typeof UsageRecordSchema>;

/** What a handler knows; the meter stamps the time and fills a missing project with null. */
export type UsageInput = Omit<UsageRecord, "time" | "project"> & {
  project?: string | null | undefined;
  time?: string | undefined;
};

export function parseUsageRecord(value: unknown): UsageRecord {
  return UsageRecordSchema.parse(value);
}
