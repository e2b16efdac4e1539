import { afterAll, beforeAll } from "vitest";
import { PaymentProviderClient } from "../../../gateway/pay/provider-client.js";
import type { SettlementRecord } from "../../../gateway/pay/settlement.js";
import {
  startPaymentProvider,
  type PaymentProvider,
} from "../../fixtures/payment-provider/server.js";

/**
 * The real payment-provider fixture and a client of it, started once for a
 * test file and closed after it. `use` receives both when they are up, so
 * that the file keeps plain `provider` and `client` bindings.
 */
export function usePaymentProvider(
  timeouts: { checkTimeoutMs?: number; settleTimeoutMs?: number },
  use: (started: { provider: PaymentProvider; client: PaymentProviderClient }) => void,
): void {
  let provider: PaymentProvider | undefined;
  let client: PaymentProviderClient | undefined;
  beforeAll(async () => {
    provider = await startPaymentProvider();
    client = new PaymentProviderClient({
      baseUrl: provider.url,
      credential: provider.credential,
      ...timeouts,
    });
    use({ provider, client });
  });
  afterAll(async () => {
    await client?.close();
    await provider?.close();
  });
}

/** A settlement as the payment route journals it; `n` makes its ids unique. */
export function settlementRecord(
  n: number | string,
  overrides: Partial<SettlementRecord> = {},
): SettlementRecord {
  return {
    responseId: `resp_${n}`,
    requestId: `req_${n}`,
    agentId: "agent-b",
    payRequestId: `payreq-${n}`,
    signedBy: { digest: "ab".repeat(32), kid: "k1", timestamp: 1_800_000_000, scheme: "v1" },
    serviceSlug: "tiny-gpt",
    model: "tiny-gpt",
    inputTokens: 5,
    outputTokens: 7,
    createdAtMs: 1_800_000_000_000,
    ...overrides,
  };
}
