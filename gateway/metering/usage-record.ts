import { z } from "zod";
import { currencySchema, decimalSchema } from "../store/ledger-entry.js";

/**
 * One metered request of the API-key route: the record the meter journals
 * (camelCase, as in code) and sends to the usage sink (snake_case, as on the
 * wire, by `toWireUsage`).
 *
 * It is keyed by `responseId`, the id the gateway mints for every request:
 * one served request is one record, whatever `x-request-id` callers send.
 * `requestId` is the caller's correlation id, for their logs and ours only.
 * `time` is when the gateway finished the request (RFC 3339, UTC).
 */
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

export const usageRecordSchema = z
  .object({
    responseId: z.string().min(1),
    requestId: z.string().min(1),
    account: z.string().min(1),
    /** The `x-project-id` the request was scoped to; null when it named none. */
    project: z.string().min(1).nullable(),
    /** The API key's id; null only in records journaled before keys were recorded. */
    keyId: z.string().min(1).nullable(),
    model: z.string().min(1),
    inputTokens: count,
    outputTokens: count,
    /** Of the input tokens, those read from the runtime's prefix cache; absent in records journaled before. */
    cachedTokens: count.optional(),
    /**
     * What the request cost at the model's prices when it was answered;
     * absent only in records journaled before prices were recorded.
     */
    cost: decimalSchema.optional(),
    currency: currencySchema.optional(),
    time: z.iso.datetime({ offset: true }),
  })
  .strict();

export type UsageRecord = z.infer<typeof usageRecordSchema>;

/**
 * Records journaled by a gateway before records were keyed by the response
 * id (snake_case, keyed by `request_id`): still owed to the sink after an
 * upgrade, so read and converted rather than dead-lettered.
 */
const legacyUsageRecordSchema = z
  .object({
    request_id: z.string().min(1),
    account: z.string().min(1),
    project: z.string().min(1).nullable(),
    model: z.string().min(1),
    input_tokens: count,
    output_tokens: count,
    time: z.iso.datetime({ offset: true }),
  })
  .strict()
  .transform((legacy): UsageRecord => ({
    responseId: legacy.request_id,
    requestId: legacy.request_id,
    account: legacy.account,
    project: legacy.project,
    keyId: null,
    model: legacy.model,
    inputTokens: legacy.input_tokens,
    outputTokens: legacy.output_tokens,
    time: legacy.time,
  }));

const journaledUsageRecordSchema = z.union([usageRecordSchema, legacyUsageRecordSchema]);

/** The outbox's `parse` for records read back from the journal; throws on a corrupt one. */
export function parseUsageRecord(value: unknown): UsageRecord {
  return journaledUsageRecordSchema.parse(value);
}

/** A usage record as the sink receives it (docs/metering.md). */
export interface WireUsageRecord {
  response_id: string;
  request_id: string;
  account: string;
  project: string | null;
  key_id: string | null;
  model: string;
  input_tokens: number;
  output_tokens: number;
  time: string;
}

export function toWireUsage(record: UsageRecord): WireUsageRecord {
  return {
    response_id: record.responseId,
    request_id: record.requestId,
    account: record.account,
    project: record.project,
    key_id: record.keyId,
    model: record.model,
    input_tokens: record.inputTokens,
    output_tokens: record.outputTokens,
    time: record.time,
  };
}
