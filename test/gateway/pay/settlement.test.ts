import { describe, expect, it } from "vitest";
import type { PaymentProviderClient } from "../../../gateway/pay/provider-client.js";
import { SettlementError } from "../../../gateway/pay/provider-client.js";
import {
  isRetryableSettlementError,
  parseSettlementRecord,
  settlementSender,
  type SettlementRecord,
} from "../../../gateway/pay/settlement.js";
import type { PaymentProvider } from "../../fixtures/payment-provider/server.js";
import { settlementRecord, usePaymentProvider } from "./provider-support.js";

const record: SettlementRecord = settlementRecord(42);

let provider: PaymentProvider;
let client: PaymentProviderClient;
usePaymentProvider({ settleTimeoutMs: 300 }, (started) => ({ provider, client } = started));

describe("settlementSender", () => {
  it("delivers a record under the outbox's key, once however often it is replayed", async () => {
    const settled: boolean[] = [];
    const send = settlementSender(client, { onSettled: (_r, again) => settled.push(again) });
    await send(record, "req_42");
    await send(record, "req_42");
    await send({ ...record, outputTokens: 8 }, "req_42");
    expect(settled).toEqual([false, false, true]);
    expect(provider.ledger.settlements).toHaveLength(1);
    expect(provider.ledger.balance("agent-b").spentTokens).toBe(12);
  });

  it("throws a retryable error while the provider is out, and delivers once it is back", async () => {
    const send = settlementSender(client);
    const key = "req_43";
    for (const mode of ["fail-5xx", "hang", "down"] as const) {
      await provider.setMode(mode);
      const error = await send({ ...record, requestId: key }, key).catch((e: unknown) => e);
      expect(isRetryableSettlementError(error)).toBe(true);
    }
    await provider.setMode("allow");
    await send({ ...record, requestId: key }, key);
    expect(provider.ledger.settlements.map((s) => s.idempotencyKey)).toContain(key);
  });

  it("throws a non-retryable error when the provider rejects the record", async () => {
    await provider.setMode("deny", "settle");
    try {
      const error = await settlementSender(client)(record, "req_44").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SettlementError);
      expect(isRetryableSettlementError(error)).toBe(false);
    } finally {
      await provider.setMode("allow");
    }
  });

  it("passes the outbox's abort signal on, and stays retryable when it fires", async () => {
    await provider.setMode("hang");
    try {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 30);
      const started = performance.now();
      const error = await settlementSender(client)(record, "req_46", {
        signal: controller.signal,
      }).catch((e: unknown) => e);
      expect(performance.now() - started).toBeLessThan(250);
      expect(isRetryableSettlementError(error)).toBe(true);
    } finally {
      await provider.setMode("allow");
    }
  });

  it("treats errors it does not know as retryable", () => {
    expect(isRetryableSettlementError(new Error("socket hang up"))).toBe(true);
    expect(isRetryableSettlementError(new SettlementError("x", false, 400))).toBe(false);
  });
});

describe("parseSettlementRecord", () => {
  it("returns a record read back from JSON", () => {
    expect(parseSettlementRecord(JSON.parse(JSON.stringify(record)))).toEqual(record);
    expect(parseSettlementRecord({ ...record, agentId: null }).agentId).toBeNull();
  });

  it("reads back a settlement journaled by the previous version, keyed by its request id", () => {
    const legacy = {
      requestId: "req_old",
      agentId: "agent-b",
      serviceSlug: "tiny-gpt",
      model: "tiny-gpt",
      inputTokens: 1,
      outputTokens: 2,
      createdAtMs: 1,
    };
    expect(parseSettlementRecord(legacy)).toEqual({
      ...legacy,
      responseId: "req_old",
      payRequestId: null,
      signedBy: null,
    });
  });

  it.each([
    ["null", null],
    ["a string", "req_42"],
    ["no response id", { ...record, responseId: "" }],
    ["no request id", { ...record, requestId: "" }],
    ["a signature without its digest", { ...record, signedBy: { kid: "k1", timestamp: 1 } }],
    ["an unknown field", { ...record, extra: 1 }],
    ["a negative count", { ...record, outputTokens: -1 }],
    ["a string count", { ...record, inputTokens: "5" }],
    ["no timestamp", { ...record, createdAtMs: undefined }],
  ])("throws, without retry, on %s", (_name, value) => {
    let error: unknown;
    try {
      parseSettlementRecord(value);
    } catch (e) {
      error = e;
    }
    expect(isRetryableSettlementError(error)).toBe(false);
  });
});
