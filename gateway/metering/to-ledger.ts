import type { SettlementRecord } from "../pay/settlement.js";
import type { LedgerEntry } from "../store/ledger-entry.js";
import type { UsageRecord } from "./usage-record.js";

/**
 * The ledger's account for the payment route. Its requests are paid through
 * the payment provider, not by one of the keys file's accounts: they are
 * recorded under this one account, with the provider's signing key id as
 * the key and the caller's (unsigned) `pay-agent-id` beside it.
 */
export const PAY_ACCOUNT = "pay";

/** Records journaled before prices were recorded count as free: their price was never applied. */
const UNPRICED = { cost: "0", currency: "USD" } as const;

export function ledgerEntryOfUsage(record: UsageRecord): LedgerEntry {
  return {
    responseId: record.responseId,
    requestId: record.requestId,
    route: "/v1/responses",
    account: record.account,
    project: record.project,
    keyId: record.keyId,
    agentId: null,
    model: record.model,
    inputTokens: record.inputTokens,
    outputTokens: record.outputTokens,
    cachedTokens: record.cachedTokens ?? 0,
    cost: record.cost ?? UNPRICED.cost,
    currency: record.currency ?? UNPRICED.currency,
    time: record.time,
  };
}

export function ledgerEntryOfSettlement(record: SettlementRecord): LedgerEntry {
  return {
    responseId: record.responseId,
    requestId: record.requestId,
    route: "/pay/v1/responses",
    account: PAY_ACCOUNT,
    project: null,
    keyId: record.signedBy?.kid ?? null,
    agentId: record.agentId,
    model: record.model,
    inputTokens: record.inputTokens,
    outputTokens: record.outputTokens,
    cachedTokens: record.cachedTokens ?? 0,
    cost: record.cost ?? UNPRICED.cost,
    currency: record.currency ?? UNPRICED.currency,
    time: new Date(record.createdAtMs).toISOString(),
  };
}
