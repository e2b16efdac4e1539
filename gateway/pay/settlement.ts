import type { PaymentProviderClient, SettlementRequest } from "./provider-client.js";
import { SettlementError } from "./provider-client.js";

/**
 * What the payment route hands to the durable outbox once a response is
 * known, and the `send` the outbox calls to deliver it. The outbox owns
 * durability, backoff and replay; this file only says what one delivery
 * attempt means.
 */

/**
 * One settlement, as written to disk by the outbox. Plain JSON fields only:
 * the record outlives the process and may be replayed by a newer version, so
 * fields are only ever added, never renamed.
 */
export interface SettlementRecord {
  readonly requestId: string;
  readonly agentId: string | null;
  readonly serviceSlug: string;
  readonly model: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Unix milliseconds when the response was sent; for logs and age metrics. */
  readonly createdAtMs: number;
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
    if (!isValidRecord(record)) {
      // A record we cannot even describe to the provider will not improve with
      // time; retrying it would only block the queue behind it.
      throw new SettlementError("settlement record is not well formed", false);
    }
    const outcome = await client.settle(toRequest(record), {
      idempotencyKey,
      signal: options.signal,
    });
    hooks.onSettled?.(record, outcome.alreadySettled);
  };
}

/**
 * The outbox's `parse` for records read back from disk: returns the record,
 * or throws so the outbox parks a corrupt line instead of sending it.
 */
export function parseSettlementRecord(value: unknown): SettlementRecord {
  if (!isValidRecord(value) || !isCount((value as Record<string, unknown>).createdAtMs)) {
    throw new SettlementError("settlement record is not well formed", false);
  }
  return value as SettlementRecord;
}

/** The outbox's `isRetryable`. Unknown errors are retried: losing a settlement is worse. */
export function isRetryableSettlementError(error: unknown): boolean {
  return !(error instanceof SettlementError) || error.retryable;
}

function toRequest(record: SettlementRecord): SettlementRequest {
  return {
    requestId: record.requestId,
    agentId: record.agentId,
    serviceSlug: record.serviceSlug,
    model: record.model,
    inputTokens: record.inputTokens,
    outputTokens: record.outputTokens,
  };
}

function isValidRecord(record: unknown): boolean {
  // Replayed records come from disk, so the types are checked, not assumed.
  if (typeof record !== "object" || record === null) return false;
  const r = record as Record<string, unknown>;
  return (
    typeof r.requestId === "string" &&
    r.requestId.length > 0 &&
    (r.agentId === null || typeof r.agentId === "string") &&
    typeof r.serviceSlug === "string" &&
    typeof r.model === "string" &&
    isCount(r.inputTokens) &&
    isCount(r.outputTokens)
  );
}

function isCount(value: unknown): boolean {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}
