import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ledgerEntryOfSettlement } from "../../../gateway/metering/to-ledger.js";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import type { PaymentProviderClient } from "../../../gateway/pay/provider-client.js";
import { SettlementError } from "../../../gateway/pay/provider-client.js";
import {
  isRetryableSettlementError,
  parseSettlementRecord,
  settlementSender,
  type SettlementRecord,
} from "../../../gateway/pay/settlement.js";
import {
  createLedgerSender,
  isRetryableLedgerError,
  ledgerThenEach,
} from "../../../gateway/store/ledger-sink.js";
import { openStore, type Store } from "../../../gateway/store/store.js";
import type { PaymentProvider } from "../../fixtures/payment-provider/server.js";
import { settlementRecord, usePaymentProvider } from "../pay/provider-support.js";
import { fastRetry, logs, onCleanup, outboxDir } from "../outbox/support.js";
import { useStoreEngines } from "./engines.js";

/**
 * The payment route's settlements as components.ts wires them: journaled,
 * written to the ledger a batch at a time, then settled with the real
 * provider fixture one by one. Against both ledger engines.
 */
const engines = useStoreEngines();

let provider: PaymentProvider;
let client: PaymentProviderClient;
usePaymentProvider({ settleTimeoutMs: 300 }, (started) => ({ provider, client } = started));

let counter = 0;
function settlement(): SettlementRecord {
  counter += 1;
  return settlementRecord(`then_each_${counter}`);
}

const isRetryable = (error: unknown) =>
  error instanceof SettlementError
    ? isRetryableSettlementError(error)
    : isRetryableLedgerError(error);

async function ledgerIds({ db }: Store): Promise<string[]> {
  const rows = await db.selectFrom("usage_ledger").select("response_id").execute();
  return rows.map((row) => row.response_id).sort();
}

describe.each(engines)("settlements through the ledger on $name", (engine) => {
  async function setup() {
    const store = await openStore(await engine.newTarget());
    onCleanup(() => store.close());
    const batches: number[] = [];
    const dir = await outboxDir();
    const outbox = new DurableOutbox<SettlementRecord>({
      dir,
      name: "settlements",
      sendBatch: ledgerThenEach(
        createLedgerSender(store.db, { onWritten: (entries) => batches.push(entries) }),
        ledgerEntryOfSettlement,
        settlementSender(client),
        isRetryable,
      ),
      maxBatch: 16,
      isRetryable,
      parse: parseSettlementRecord,
      retry: fastRetry,
      logger: logs().logger,
    });
    onCleanup(() => outbox.close());
    await outbox.start();
    return { store, outbox, batches, dir };
  }

  it("settlements that wait together share a ledger write; each is settled once", async () => {
    const { store, outbox, batches } = await setup();
    const records = Array.from({ length: 40 }, settlement);
    await Promise.all(records.map((r) => outbox.append(r.responseId, r)));
    await outbox.whenIdle();
    const ids = records.map((r) => r.responseId).sort();
    expect(await ledgerIds(store)).toEqual(ids);
    const settled = provider.ledger.settlements.map((s) => s.idempotencyKey);
    for (const id of ids) expect(settled.filter((key) => key === id)).toHaveLength(1);
    // A settle that timed out on a busy machine retries its batch: more
    // than 40 may have been written, never fewer, and batches held several.
    expect(batches.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(40);
    expect(Math.max(...batches)).toBeGreaterThan(1);
    expect(Math.max(...batches)).toBeLessThanOrEqual(16);
  });

  it("a provider outage retries the batch: the ledger and the provider count each once", async () => {
    const { store, outbox, batches } = await setup();
    await provider.setMode("fail-5xx", "settle");
    const records = Array.from({ length: 6 }, settlement);
    try {
      await Promise.all(records.map((r) => outbox.append(r.responseId, r)));
      await expect.poll(() => batches.length).toBeGreaterThan(1);
    } finally {
      await provider.setMode("allow");
    }
    await outbox.whenIdle();
    const ids = records.map((r) => r.responseId).sort();
    expect(await ledgerIds(store)).toEqual(ids);
    const settled = provider.ledger.settlements.map((s) => s.idempotencyKey);
    for (const id of ids) expect(settled.filter((key) => key === id)).toHaveLength(1);
  });

  it("settlements the provider refuses are parked one by one, and stay in the ledger", async () => {
    const { store, outbox, dir } = await setup();
    await provider.setMode("deny", "settle");
    const records = Array.from({ length: 3 }, settlement);
    try {
      await Promise.all(records.map((r) => outbox.append(r.responseId, r)));
      await outbox.whenIdle();
    } finally {
      await provider.setMode("allow");
    }
    expect(await ledgerIds(store)).toEqual(records.map((r) => r.responseId).sort());
    const parked = (await readFile(join(dir, "settlements.dead.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { key: string }).key)
      .sort();
    expect(parked).toEqual(records.map((r) => r.responseId).sort());
  });
});
