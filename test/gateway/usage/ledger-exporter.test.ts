import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createHttpSinkSender, isRetryableSinkError } from "../../../gateway/metering/http-sink.js";
import type { LedgerEntry } from "../../../gateway/store/ledger-entry.js";
import { openStore, type Store } from "../../../gateway/store/store.js";
import { createLedgerSender } from "../../../gateway/store/ledger-sink.js";
import { recordLedgerEntries } from "../../../gateway/store/usage-ledger.js";
import { LedgerExporter, type WireLedgerRecord } from "../../../gateway/usage/ledger-exporter.js";
import { startCountingSink, type CountingSink } from "../outbox/sink-server.js";
import { fastRetry, logs, onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";

/**
 * One exporter of the ledger to a real HTTP sink on loopback: on a real
 * PostgreSQL server with two exporters (as two replicas run them), every
 * row is delivered, none by both, and the other takes over when the
 * holder's session dies; on PGlite, the one process exports.
 */
const engines = useStoreEngines();
const postgres = engines.find((engine) => engine.name === "postgres")!;
const pglite = engines.find((engine) => engine.name === "pglite")!;

let counter = 0;
function entry(overrides: Partial<LedgerEntry> = {}): LedgerEntry {
  counter += 1;
  return {
    responseId: `resp_${counter.toString().padStart(6, "0")}`,
    requestId: `req-${counter}`,
    route: "/v1/responses",
    account: "acme",
    project: null,
    keyId: "key_a",
    agentId: null,
    model: "tiny-gpt",
    inputTokens: counter,
    outputTokens: 2,
    cost: "0.000001",
    currency: "EUR",
    time: new Date().toISOString(),
    ...overrides,
  };
}

async function until(what: string, done: () => boolean | Promise<boolean>, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

interface Replica {
  exporter: LedgerExporter;
  store: Store;
  sent: string[];
  leadership: boolean[];
}

async function replica(
  target: { url: string } | { dataDir: string },
  sink: CountingSink,
  /** The lock session's application_name, by which a test ends that replica's session alone. */
  name = "replica",
): Promise<Replica> {
  const store = await openStore(target);
  const sent: string[] = [];
  const leadership: boolean[] = [];
  const exporter = new LedgerExporter({
    db: () => Promise.resolve(store.db),
    ...("url" in target ? { lockUrl: withApplicationName(target.url, name) } : {}),
    send: createHttpSinkSender<WireLedgerRecord>({ url: sink.url }),
    isRetryable: isRetryableSinkError,
    logger: logs().logger,
    batchSize: 20,
    pollMs: 50,
    retry: fastRetry,
    hooks: {
      onExported: (rows) => sent.push(...rows.map((row) => row.response_id)),
      onLeadership: (held) => leadership.push(held),
    },
  });
  onCleanup(async () => {
    await exporter.close();
    await store.close();
  });
  return { exporter, store, sent, leadership };
}

function withApplicationName(url: string, name: string): string {
  const named = new URL(url);
  named.searchParams.set("application_name", name);
  return named.toString();
}

/** Writes entries from `writers` connections at once, in batches of 1 to 7: commits interleave. */
async function writeConcurrently(stores: Store[], entries: LedgerEntry[]): Promise<void> {
  const queue = [...entries];
  await Promise.all(
    stores.map(async (store, i) => {
      while (queue.length > 0) {
        const batch = queue.splice(0, 1 + ((queue.length + i) % 7));
        await recordLedgerEntries(store.db, batch);
      }
    }),
  );
}

describe("ledger exporter on postgres: two replicas, one real sink", () => {
  it("delivers every API-key row once, by one replica, and the other takes over when it dies", async () => {
    const target = { url: await (await postgres.server()).createDatabase() };
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const a = await replica(target, sink, "replica-a");
    const b = await replica(target, sink, "replica-b");
    const writers = await Promise.all([1, 2, 3].map(() => openStore(target)));
    onCleanup(() => Promise.all(writers.map((w) => w.close())));

    a.exporter.start();
    await until("a to lead", () => a.exporter.leading);
    b.exporter.start();

    const first = Array.from({ length: 240 }, (_, i) =>
      entry(i % 8 === 0 ? { route: "/pay/v1/responses", account: "pay", keyId: "k1" } : {}),
    );
    // Written while the exporter runs, from three connections at once.
    await writeConcurrently(writers, first);
    const wanted = first.filter((e) => e.route === "/v1/responses").map((e) => e.responseId);
    await until("every row at the sink", () => wanted.every((id) => sink.counted.has(id)));
    // Nothing more arrives, and nothing came twice or from the other replica.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect([...sink.counted.keys()].sort()).toEqual([...wanted].sort());
    expect(sink.attempts).toHaveLength(wanted.length);
    expect(a.sent.sort()).toEqual([...wanted].sort());
    expect(b.sent).toEqual([]);
    expect(b.exporter.leading).toBe(false);
    // The payment route is billed by the provider: not sent to the usage sink.
    expect(
      sink.attempts.some((id) => first.find((e) => e.responseId === id)?.account === "pay"),
    ).toBe(false);
    const record = sink.counted.get(wanted[0]!) as WireLedgerRecord;
    expect(record).toMatchObject({ response_id: wanted[0], account: "acme", cost: "0.000001" });

    // The holder's session dies (as when its pod is killed): the server
    // releases the lock and the other replica exports what follows. A stays
    // alive here and may win the lock back before B's next try (a loaded
    // machine decides that race), so its session is ended again until B holds
    // it. Only A's: B may have just taken the lock while A's flag still says
    // it leads, and ending whoever holds it would end B's.
    const endHolderSession = () =>
      sql`
        SELECT pg_terminate_backend(l.pid) FROM pg_locks l
        JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'replica-a'
      `.execute(writers[0]!.db);
    await endHolderSession();
    await until("b to lead", async () => {
      if (b.exporter.leading) return true;
      if (a.exporter.leading) await endHolderSession();
      return false;
    });
    expect(a.exporter.leading).toBe(false);
    const second = Array.from({ length: 60 }, () => entry());
    await writeConcurrently(writers, second);
    const all = [...wanted, ...second.map((e) => e.responseId)];
    await until("the rows after the takeover", () => all.every((id) => sink.counted.has(id)));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sink.attempts).toHaveLength(all.length);
    expect(b.sent.sort()).toEqual(second.map((e) => e.responseId).sort());
    // A, alive but without the lock, tries again and finds it held.
    expect(a.exporter.leading).toBe(false);
    expect(b.leadership).toEqual([true]);
  });

  it("keeps a batch the sink failed and sends it again; passes over a row it refuses for good", async () => {
    const target = { url: await (await postgres.server()).createDatabase() };
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const a = await replica(target, sink);
    const rows = Array.from({ length: 30 }, () => entry());
    sink.failNext(3, 503);
    sink.rejectKey(rows[5]!.responseId, 422);
    await recordLedgerEntries(a.store.db, rows);
    a.exporter.start();
    const others = rows.filter((_, i) => i !== 5).map((e) => e.responseId);
    await until("every other row", () => others.every((id) => sink.counted.has(id)));
    expect(sink.counted.has(rows[5]!.responseId)).toBe(false);
    // The cursor is past every row: a restart sends nothing again.
    await a.exporter.close();
    const attempts = sink.attempts.length;
    const again = await replica(target, sink);
    again.exporter.start();
    await until("the new exporter to lead", () => again.exporter.leading);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sink.attempts).toHaveLength(attempts);
  });
});

describe("ledger exporter on pglite", () => {
  it("the one process exports every row in order", async () => {
    const target = await pglite.newTarget();
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const a = await replica(target, sink);
    const rows = Array.from({ length: 45 }, () => entry());
    await recordLedgerEntries(a.store.db, rows.slice(0, 20));
    a.exporter.start();
    await recordLedgerEntries(a.store.db, rows.slice(20));
    await until("every row", () => rows.every((e) => sink.counted.has(e.responseId)));
    expect(sink.attempts).toEqual(rows.map((e) => e.responseId));
  });

  it("reads many rows at once, posts them a batch at a time, and moves the cursor past them", async () => {
    const target = await pglite.newTarget();
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const a = await replica(target, sink);
    const rows = Array.from({ length: 50 }, () => entry());
    await recordLedgerEntries(a.store.db, rows);
    a.exporter.start();
    await until("every row", () => rows.every((e) => sink.counted.has(e.responseId)));
    // One read of all 50 (readSize 500), posted 20, 20 and 10.
    expect(sink.batches.map((batch) => batch.length)).toEqual([20, 20, 10]);
    expect(sink.attempts).toEqual(rows.map((e) => e.responseId));
    // The cursor moves once the sink has answered: it ends on the last row.
    const last = await sql<{ seq: number }>`
      SELECT seq FROM usage_ledger WHERE response_id = ${rows[49]!.responseId}
    `.execute(a.store.db);
    const cursorSeq = async () =>
      Number(
        (
          await sql<{ seq: number }>`
            SELECT seq FROM usage_export_cursor WHERE name = 'http-sink'
          `.execute(a.store.db)
        ).rows[0]!.seq,
      );
    await until(
      "the cursor past the last row",
      async () => (await cursorSeq()) === Number(last.rows[0]!.seq),
    );
    expect(sink.batches.map((batch) => batch.length)).toEqual([20, 20, 10]);
  });
});

describe("ledger exporter across a change of the transaction id's digit count", () => {
  for (const engine of [pglite, postgres]) {
    it(`exports rows of transactions 9…9 and 10…0 in transaction order (${engine.name})`, async () => {
      const target = await engine.newTarget();
      const sink = await startCountingSink();
      onCleanup(() => sink.close());
      const a = await replica(target, sink);
      const xid = async () =>
        Number(
          (await sql<{ xid: string }>`SELECT pg_current_xact_id()::text AS xid`.execute(a.store.db))
            .rows[0]!.xid,
        );
      // Each statement outside a transaction uses one transaction id: walk
      // them up to just below the next power of ten.
      const boundary = 10 ** String(await xid()).length;
      while ((await xid()) < boundary - 30);
      // One row per transaction, 30 on each side of the boundary: by text,
      // "10000" sorts before "9970", which a batch of 20 must not follow.
      const rows = Array.from({ length: 60 }, () => entry());
      for (const row of rows) await recordLedgerEntries(a.store.db, [row]);
      expect(await xid()).toBeGreaterThan(boundary);
      a.exporter.start();
      await until("every row", () => rows.every((e) => sink.counted.has(e.responseId)), 10_000);
      expect(sink.attempts).toEqual(rows.map((e) => e.responseId));
    });
  }
});

describe("ledger exporter on pglite, fed the rows as they are written", () => {
  it("sends what a read would send, once each, in order; a restart resends nothing", async () => {
    const target = await pglite.newTarget();
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const store = await openStore(target);
    onCleanup(() => store.close());
    const exporterOf = (to: CountingSink, fed: boolean) => {
      const exporter = new LedgerExporter({
        db: () => Promise.resolve(store.db),
        send: createHttpSinkSender<WireLedgerRecord>({ url: to.url }),
        isRetryable: isRetryableSinkError,
        logger: logs().logger,
        batchSize: 20,
        pollMs: 50,
        retry: fastRetry,
        fed,
      });
      onCleanup(() => exporter.close());
      return exporter;
    };
    let exporter = exporterOf(sink, true);
    const send = createLedgerSender(store.db, { onRecorded: (rows) => exporter.feed(rows) });
    const write = (entries: LedgerEntry[]) =>
      send(
        entries.map((e) => ({ key: e.responseId, record: e })),
        { signal: new AbortController().signal },
      );

    // A backlog from before this process: found by reading.
    const backlog = Array.from({ length: 25 }, () => entry());
    await recordLedgerEntries(store.db, backlog);
    exporter.start();
    await until("the backlog sent", () => backlog.every((e) => sink.counted.has(e.responseId)));
    await until("the exporter on its feed", () => exporter.exportingFromFeed);

    const fed = Array.from({ length: 70 }, (_, i) =>
      entry(
        i % 9 === 0
          ? { route: "/pay/v1/responses", account: "pay", keyId: null, agentId: "ag" }
          : i % 5 === 0
            ? { cost: "00.500", project: "proj_1", cachedTokens: 3 }
            : {},
      ),
    );
    for (let i = 0; i < fed.length; i += 7) await write(fed.slice(i, i + 7));
    await write(fed.slice(0, 14)); // a batch sent again lands once, and is fed once
    const wanted = [...backlog, ...fed].filter((e) => e.route === "/v1/responses");
    await until("every fed row", () => wanted.every((e) => sink.counted.has(e.responseId)));
    expect(exporter.exportingFromFeed).toBe(true);
    expect(sink.attempts).toEqual(wanted.map((e) => e.responseId));

    // What was sent from the feed is what reading the ledger sends: a fresh
    // exporter that reads every row from the start, to a second sink.
    await exporter.close();
    await sql`UPDATE usage_export_cursor SET txid = '0'::xid8, seq = 0`.execute(store.db);
    const reader = await startCountingSink();
    onCleanup(() => reader.close());
    const reading = exporterOf(reader, false);
    reading.start();
    await until("the read of every row", () =>
      wanted.every((e) => reader.counted.has(e.responseId)),
    );
    await reading.close();
    expect(Object.fromEntries(sink.counted)).toEqual(Object.fromEntries(reader.counted));

    // A restart after the cursor: only the rows written since go out.
    const attempts = sink.attempts.length;
    const later = Array.from({ length: 5 }, () => entry());
    await recordLedgerEntries(store.db, later);
    exporter = exporterOf(sink, true);
    exporter.start();
    await until("the later rows", () => later.every((e) => sink.counted.has(e.responseId)));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(sink.attempts.slice(attempts)).toEqual(later.map((e) => e.responseId));
  });

  it("drops a feed that outgrew its bound during a sink outage, and reads the ledger until caught up", async () => {
    const target = await pglite.newTarget();
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const store = await openStore(target);
    onCleanup(() => store.close());
    const exporter = new LedgerExporter({
      db: () => Promise.resolve(store.db),
      send: createHttpSinkSender<WireLedgerRecord>({ url: sink.url }),
      isRetryable: isRetryableSinkError,
      logger: logs().logger,
      batchSize: 10,
      pollMs: 50,
      retry: fastRetry,
      fed: true,
      maxFedRows: 15,
    });
    onCleanup(() => exporter.close());
    const send = createLedgerSender(store.db, { onRecorded: (rows) => exporter.feed(rows) });
    exporter.start();
    await until("the exporter on its feed", () => exporter.exportingFromFeed);

    sink.failNext(1_000_000, 503);
    const rows = Array.from({ length: 40 }, () => entry());
    for (let i = 0; i < rows.length; i += 5) {
      await send(
        rows.slice(i, i + 5).map((e) => ({ key: e.responseId, record: e })),
        { signal: new AbortController().signal },
      );
    }
    // More than 15 waited: the feed is gone, and the ledger is read instead.
    expect(exporter.exportingFromFeed).toBe(false);
    sink.failNext(0);
    await until("every row", () => rows.every((e) => sink.counted.has(e.responseId)));
    await until("the exporter back on its feed", () => exporter.exportingFromFeed);
    const later = Array.from({ length: 5 }, () => entry());
    await send(
      later.map((e) => ({ key: e.responseId, record: e })),
      { signal: new AbortController().signal },
    );
    await until("the later rows", () => later.every((e) => sink.counted.has(e.responseId)));
    // Each row accepted once, in order (the refused attempts aside).
    const accepted = [...sink.counted.keys()];
    expect(accepted).toEqual([...rows, ...later].map((e) => e.responseId));
  });
});
