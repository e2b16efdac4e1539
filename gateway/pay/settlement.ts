import { z } from "zod";
import { currencySchema, decimalSchema } from "../store/ledger-entry.js";
import { SettlementError, type PaymentProviderClient } from "./provider-client.js";

/**
 * A settlement: what the payment route hands to the durable outbox once a
 * response is known, as journaled (camelCase; the provider client writes the
 * wire's snake_case), and the `send` the outbox calls to deliver it. The
 * outbox owns durability, backoff and replay; this file says what one record
 * is and what one delivery attempt means.
 *
 * It is keyed by `responseId`, the id the gateway minted for the request, and
 * carries what the provider signed (`signature`) and its own request id, so
 * that the provider attributes the charge by the digest it issued: a header
 * nobody signed (`pay-agent-id`) cannot move it. Fields are only ever added:
 * a record outlives the process and may be replayed by a newer version.
 */
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

export const signedBySchema = z
  .object({
    /** The matching digest of `pay-signature`, lowercase hex, as the provider issued it. */
    digest: z.string().min(1),
    kid: z.string().min(1),
    /** The signature's `t`. */
    timestamp: count,
    /** `v2` signs the timestamp too; `v1` signs the body only. */
    scheme: z.enum(["v1", "v2"]),
  })
  .strict();

export type SignedBy = z.infer<typeof signedBySchema>;

export const settlementRecordSchema = z
  .object({
    responseId: z.string().min(1),
    /** The caller's `x-request-id`: correlation only. */
    requestId: z.string().min(1),
    /** The `pay-agent-id` header when it was fit to log: unsigned, informational. */
    agentId: z.string().min(1).nullable(),
    /** The provider's `pay-request-id`, when sent. */
    payRequestId: z.string().min(1).nullable(),
    /** Null only in settlements journaled before signatures were recorded. */
    signedBy: signedBySchema.nullable(),
    serviceSlug: z.string().min(1),
    model: z.string().min(1),
    inputTokens: count,
    outputTokens: count,
    /** Of the input tokens, those read from the runtime's prefix cache; absent in older journals. */
    cachedTokens: count.optional(),
    /** What the request cost at the model's prices; absent only in older journals. */
    cost: decimalSchema.optional(),
    currency: currencySchema.optional(),
    /** Unix milliseconds when the response was sent; for logs and age metrics. */
    createdAtMs: count,
  })
  .strict();

export type SettlementRecord = z.infer<typeof settlementRecordSchema>;

/** Settlements journaled by a gateway before they were keyed by the response id. */
const legacySettlementSchema = z
  .object({
    requestId: z.string().min(1),
    agentId: z.string().nullable(),
    serviceSlug: z.string().min(1),
    model: z.string().min(1),
    inputTokens: count,
    outputTokens: count,
    createdAtMs: count,
  })
  .strict()
  .transform((legacy): SettlementRecord => ({
    ...legacy,
    agentId: legacy.agentId || null,
    responseId: legacy.requestId,
    payRequestId: null,
    signedBy: null,
  }));

const journaledSettlementSchema = z.union([settlementRecordSchema, legacySettlementSchema]);

/**
 * The outbox's `parse` for records read back from disk: returns the record,
 * or throws so the outbox parks a corrupt line instead of sending it.
 */
export function parseSettlementRecord(value: unknown): SettlementRecord {
  const parsed = journaledSettlementSchema.safeParse(value);
  if (!parsed.success) {
    throw new SettlementError(
      `settlement record is not well formed: ${z.prettifyError(parsed.error)}`,
      false,
    );
  }
  return parsed.data;
}

/** Matches the outbox's `OutboxSend<SettlementRecord>`. */
export type SettlementSend = (
  record: SettlementRecord,
  idempotencyKey: string,
  options?: { readonly signal?: AbortSignal },
) => Promise<void>;

export interface SettlementSenderHooks {
  /** Called after each delivered settlement (409 included); for metrics. */
  readonly onSettled?: (record: SettlementRecord, alreadySettled: boolean) => void;
}

/**
 * Builds the outbox's `send`. It resolves when the provider has the
 * settlement (201/200, or 409 for a key it has already seen) and otherwise
 * throws a `SettlementError`: `retryable: true` for outages, timeouts and
 * configuration problems (the record waits for the fix), `retryable: false`
 * when the provider rejected the record itself and sending it again cannot
 * succeed. The outbox reads `retryable` to decide between backing off and
 * setting the record aside.
 */
export function settlementSender(
  client: Pick<PaymentProviderClient, "settle">,
  hooks: SettlementSenderHooks = {},
): SettlementSend {
  return async (record, idempotencyKey, options = {}) => {
    const outcome = await client.settle(record, { idempotencyKey, signal: options.signal });
    hooks.onSettled?.(record, outcome.alreadySettled);
  };
}

/** The outbox's `isRetryable`. Unknown errors are retried: losing a settlement is worse. */
export function isRetryableSettlementError(error: unknown): boolean {
  return !(error instanceof SettlementError) || error.retryable;
}
