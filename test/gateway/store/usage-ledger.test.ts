import { readFile, truncate } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import { connectStore } from "../../../gateway/store/connect.js";
import type { LedgerEntry } from "../../../gateway/store/ledger-entry.js";
import { parseLedgerEntry } from "../../../gateway/store/ledger-entry.js";
import { createLedgerSender, isRetryableLedgerError } from "../../../gateway/store/ledger-sink.js";
import { openStore, type Store } from "../../../gateway/store/store.js";
import { recordLedgerEntries } from "../../../gateway/store/usage-ledger.js";
import { freePort } from "../../support/free-port.js";
import { fastRetry, logs, onCleanup, outboxDir } from "../outbox/support.js";
import { useStoreEngines } from "./engines.js";

const engines = useStoreEngines();

function entry(n: number, overrides: Partial<LedgerEntry> = {}): LedgerEntry {
  return {
    responseId: `resp_${n.toString().padStart(4, "0")}`,
    requestId: `req-${n}`,
    route: n % 2 === 0 ? "/v1/responses" : "/pay/v1/responses",
    account: n % 2 === 0 ? "acme" : "pay",
    project: n % 2 === 0 ? "web" : null,
    keyId: n % 2 === 0 ? "key_1" : "kid-2026",
    agentId: n % 2 === 0 ? null : "agent-7",
    model: "tiny-gpt",
    inputTokens: 10 + n,
    outputTokens: 20 + n,
    cost: `0.00${n}05`,
    currency: "USD",
    time: new Date(Date.UTC(2026, 10, 25, 12, 0, n)).toISOString(),
    ...overrides,
  };
}

async function store(
  target: Awaited<ReturnType<(typeof engines)[0]["newTarget"]>>,
): Promise<Store> {
  const opened = await openStore(target);
  onCleanup(() => opened.close());
  return opened;
}

/** The ledger read back as entries, by response id. */
async function ledger({ db }: Store): Promise<LedgerEntry[]> {
  const rows = await db.selectFrom("usage_ledger").selectAll().orderBy("response_id").execute();
  return rows.map((row) =>
    parseLedgerEntry({
      responseId: row.response_id,
      requestId: row.request_id,
      route: row.route,
      account: row.account,
      project: row.project,
      keyId: row.key_id,
      agentId: row.agent_id,
      model: row.model,
      inputTokens: row.input_tokens,
      outputTokens: row.output_tokens,
      cost: row.cost,
      currency: row.currency,
      time: row.answered_at.toISOString(),
    }),
  );
}

describe.each(engines)("usage ledger on $name", (engine) => {
  it("stores every field as given, the cost exactly", async () => {
    const opened = await store(await engine.newTarget());
    const entries = [entry(1), entry(2, { cost: "123456789.123456789012" })];
    expect(await recordLedgerEntries(opened.db, entries)).toBe(2);
    expect(await ledger(opened)).toEqual(entries);
  });

  it("keeps strings that array syntax would mangle, and nulls apart from the text NULL", async () => {
    // The batch goes to the database as one array per column: quotes,
    // backslashes, commas, braces, blanks and the word NULL must survive it.
    const opened = await store(await engine.newTarget());
    const entries = [
      entry(1, { account: 'a "quoted", {braced} \\ back', project: "NULL", keyId: null }),
      entry(2, { account: "  padded  ", project: null, agentId: " ", model: "é ü 日本 🙂" }),
      entry(3, { requestId: "{}", agentId: "NULL", keyId: "'single'" }),
    ];
    expect(await recordLedgerEntries(opened.db, entries)).toBe(3);
    expect(await ledger(opened)).toEqual(entries);
  });

  it("a batch holding one response id twice stores its first copy", async () => {
    const opened = await store(await engine.newTarget());
    const twice = [entry(1), entry(2), entry(1, { inputTokens: 999 })];
    expect(await recordLedgerEntries(opened.db, twice)).toBe(2);
    expect(await ledger(opened)).toEqual([entry(1), entry(2)]);
  });

  it("a batch written twice lands once", async () => {
    const opened = await store(await engine.newTarget());
    const send = createLedgerSender(opened.db);
    const batch = [1, 2, 3, 4, 5].map((n) => ({ key: entry(n).responseId, record: entry(n) }));
    const signal = new AbortController().signal;
    await send(batch, { signal });
    await send(batch, { signal });
    // Overlapping, with a changed copy of an entry already there: first write wins.
    expect(await recordLedgerEntries(opened.db, [entry(5, { inputTokens: 999 }), entry(6)])).toBe(
      1,
    );
    expect(await ledger(opened)).toEqual([1, 2, 3, 4, 5, 6].map((n) => entry(n)));
  });

  it("writes more rows in one call than a VALUES list has parameters for, once", async () => {
    // 13 parameters a row would pass PostgreSQL's 65,535 at 5,042 rows.
    const opened = await store(await engine.newTarget());
    const many = Array.from({ length: 6000 }, (_, n) => entry(n + 10));
    expect(await recordLedgerEntries(opened.db, many)).toBe(6000);
    expect(await recordLedgerEntries(opened.db, many.slice(900, 1200))).toBe(0);
    expect((await ledger(opened)).length).toBe(6000);
  });

  it("an entry replayed from the journal after a crash lands once", async () => {
    const opened = await store(await engine.newTarget());
    const dir = await outboxDir();
    let sent = 0;
    const sendToLedger = createLedgerSender(opened.db, { onWritten: (count) => (sent += count) });
    const outbox = () => {
      const box = new DurableOutbox<LedgerEntry>({
        dir,
        name: "ledger",
        sendBatch: sendToLedger,
        isRetryable: isRetryableLedgerError,
        parse: parseLedgerEntry,
        retry: fastRetry,
        logger: logs().logger,
      });
      onCleanup(() => box.close());
      return box;
    };
    const first = outbox();
    await first.start();
    for (const n of [1, 2, 3]) await first.append(entry(n).responseId, entry(n));
    await first.whenIdle();
    await first.close();
    expect(sent).toBe(3);
    // Acks are written without fsync: a crash of the machine right after a
    // delivery loses them, and the journal still owes the entries.
    await truncate(join(dir, "ledger.acks.jsonl"), 0);

    const second = outbox();
    await second.start();
    await second.whenIdle();
    expect(sent).toBe(6); // replayed: all three were shipped again
    expect(await ledger(opened)).toEqual([1, 2, 3].map((n) => entry(n)));
  });

  it("a bad entry is refused for good; the rest of its batch lands", async () => {
    const opened = await store(await engine.newTarget());
    const dir = await outboxDir();
    const box = new DurableOutbox<LedgerEntry>({
      dir,
      name: "ledger",
      sendBatch: createLedgerSender(opened.db),
      isRetryable: isRetryableLedgerError,
      retry: fastRetry,
      lingerMs: 50,
      logger: logs().logger,
    });
    onCleanup(() => box.close());
    await box.start();
    // Negative tokens pass no schema here on purpose: the table's CHECK refuses them.
    const bad = entry(2, { outputTokens: -1 });
    await Promise.all([entry(1), bad, entry(3)].map((e) => box.append(e.responseId, e)));
    await box.whenIdle();
    expect(await ledger(opened)).toEqual([entry(1), entry(3)]);
    const parked = await readFile(join(dir, "ledger.dead.jsonl"), "utf8");
    expect(parked).toContain(bad.responseId);
    expect(parked).not.toContain(entry(1).responseId);
  });
});

describe("ledger errors", () => {
  it("a server that cannot be reached is retried; a refused row is not", async () => {
    const { db } = await connectStore({
      url: `postgres://postgres@127.0.0.1:${await freePort()}/x`,
    });
    onCleanup(() => db.destroy());
    const unreachable = await recordLedgerEntries(db, [entry(1)]).catch((error: unknown) => error);
    expect(unreachable).toBeInstanceOf(Error);
    expect(isRetryableLedgerError(unreachable)).toBe(true);

    const postgres = engines.find((engine) => engine.name === "postgres")!;
    const opened = await store(await postgres.newTarget());
    const refused = await recordLedgerEntries(opened.db, [entry(1, { inputTokens: -5 })]).catch(
      (error: unknown) => error,
    );
    expect((refused as { code?: string }).code).toBe("23514");
    expect(isRetryableLedgerError(refused)).toBe(false);
  });
});
