import { sql, type Kysely } from "kysely";
import pg from "pg";
import { errorText } from "../../lib/error-text.js";
import type { Logger } from "../../lib/logger.js";
import type { OutboxSendBatch } from "../outbox/durable-outbox.js";
import { backoffDelayMs, type RetryPolicy } from "../outbox/backoff.js";
import type { Database } from "../store/database.js";
import type { LedgerEntry } from "../store/ledger-entry.js";
import type { RecordedEntry } from "../store/ledger-sink.js";

/**
 * One exporter of the ledger to the HTTP usage sink, whatever the number of
 * gateway replicas: the replica that holds a PostgreSQL advisory lock
 * (`pg_try_advisory_lock`, on a connection of its own, held for as long as
 * that connection lives) exports; the others try again every poll and take
 * over within one poll of the holder's death, when the server ends its
 * session and so releases the lock. On PGlite the database belongs to one
 * process, which is the one exporter.
 *
 * Rows go in the ledger's export order (see migration 0002) after a durable
 * cursor, which moves only after the sink accepted the batch: delivery is
 * at least once (a holder that dies between the sink's answer and the
 * cursor's update sends that batch again), each row keyed by its response
 * id, on which the sink dedupes (docs/metering.md).
 */
export interface ExportedRow {
  response_id: string;
  request_id: string;
  route: string;
  account: string;
  project: string | null;
  key_id: string | null;
  model: string;
  input_tokens: number;
  output_tokens: number;
  cost: string;
  currency: string;
  answered_at: Date;
  txid: string;
  seq: number;
}

/** A ledger row as the usage sink receives it: the record of docs/metering.md, and its price. */
export interface WireLedgerRecord {
  response_id: string;
  request_id: string;
  account: string;
  project: string | null;
  key_id: string | null;
  model: string;
  input_tokens: number;
  output_tokens: number;
  cost: string;
  currency: string;
  time: string;
}

export function toWireLedgerRecord(row: ExportedRow): WireLedgerRecord {
  return {
    response_id: row.response_id,
    request_id: row.request_id,
    account: row.account,
    project: row.project,
    key_id: row.key_id,
    model: row.model,
    input_tokens: Number(row.input_tokens),
    output_tokens: Number(row.output_tokens),
    cost: row.cost,
    currency: row.currency,
    time: new Date(row.answered_at).toISOString(),
  };
}

/** The cursor's name: one per sink. */
export const HTTP_SINK_CURSOR = "http-sink";
/**
 * The advisory lock's key (a bigint, shared by every replica): "mgexport"
 * in ASCII, unlikely to meet another application's lock on the database.
 */
export const EXPORT_LOCK_KEY = 0x6d_67_65_78_70_6f_72_74n;

export interface ExporterHooks {
  /** After the sink accepted a batch and the cursor moved past it. */
  onExported?(rows: readonly ExportedRow[]): void;
  /** A row the sink refused for good: logged and passed, so it never blocks the rest. */
  onRefused?(row: ExportedRow, error: unknown): void;
  /** The lock was taken (true) or lost (false). */
  onLeadership?(held: boolean): void;
}

export interface LedgerExporterOptions {
  /** The ledger's store (the pool); rejects while it cannot be opened. */
  db: () => Promise<Kysely<Database>>;
  /** The server's URL, for the lock's own connection; absent on PGlite (no lock needed). */
  lockUrl?: string;
  send: OutboxSendBatch<WireLedgerRecord>;
  /** Whether an error of `send` may pass on a retry; a row refused for good is passed over. */
  isRetryable: (error: unknown) => boolean;
  logger: Logger;
  /** Rows per POST, at most; default 100. */
  batchSize?: number;
  /**
   * Rows read per query, at most, then posted `batchSize` at a time; default
   * 500. On PGlite a query costs the event loop about 2 ms beyond its rows
   * (about 20 us each): 100 rows a query cost about 44 us a row, 1,000 about
   * 22 us but block the event loop for some 20 ms at once; 500, about 24 us
   * a row and 10 ms (docs/state.md).
   */
  readSize?: number;
  /** How often a replica without the lock tries it, and the holder looks for new rows; default 1 s. */
  pollMs?: number;
  retry?: RetryPolicy;
  hooks?: ExporterHooks;
  /**
   * Whether rows come through `feed` as the ledger takes them: only where
   * this process is the ledger's one writer of exported rows and its
   * queries run one at a time (the embedded PGlite). See `feed`.
   */
  fed?: boolean;
  /** Fed rows held at most; default MAX_FED_ROWS. */
  maxFedRows?: number;
}

/** Fed rows held at most while the sink is behind; past it the exporter reads the ledger again. */
export const MAX_FED_ROWS = 10_000;

interface FedRow {
  readonly row: ExportedRow;
  readonly txid: bigint;
  readonly seq: bigint;
}

/** Which rows go to the sink: the API-key route's, as before the ledger (the payment provider bills the other). */
const EXPORTED_ROUTE = "/v1/responses";

export class LedgerExporter {
  private readonly options: LedgerExporterOptions;
  /** The lock's connection, kept open between tries: a replica that waits does not reconnect every poll. */
  private lock: pg.Client | null = null;
  /** Whether `lock`'s session holds the advisory lock. */
  private held = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private failures = 0;
  private readonly abort = new AbortController();
  /** Whether this replica holds the lock (always, on PGlite). */
  leading = false;
  /** Rows fed since they were written, not yet exported, in no promised order. */
  private fedRows: FedRow[] = [];
  /** Exporting from `fedRows` without reading the ledger (see `feed`). */
  private fromFeed = false;
  /** Fed rows were dropped since the last read began: the feed has a gap. */
  private lost = false;
  /** The last row passed (exported or not), in the export order; null before the cursor is read. */
  private position: { txid: bigint; seq: bigint } | null = null;

  constructor(options: LedgerExporterOptions) {
    this.options = options;
  }

  start(): void {
    this.schedule(0);
  }

  /**
   * Rows the ledger just took, with where they landed (ledger-sink.ts):
   * with `fed`, once a read of the ledger found nothing more after the
   * cursor, the exporter sends these instead of reading each row back
   * (about 24 us of the event loop a row on PGlite, docs/state.md). The
   * durable cursor still moves after each batch the sink accepted, so a
   * restart resends nothing it acknowledged and finds everything else by
   * reading, as before. It is exact because every exported row is fed and
   * PGlite runs one statement at a time: a row is never committed behind
   * one already passed, so a fed row at or before the position was already
   * read. When more than MAX_FED_ROWS wait (a sink outage), the feed is
   * dropped and the exporter reads the ledger until it has caught up again.
   */
  feed(recorded: readonly RecordedEntry[]): void {
    if (!this.options.fed || this.closed) return;
    for (const { entry, position } of recorded) {
      if (entry.route !== EXPORTED_ROUTE) continue;
      this.fedRows.push({
        row: exportedRowOf(entry, position.txid, position.seq),
        txid: BigInt(position.txid),
        seq: BigInt(position.seq),
      });
    }
    if (this.fedRows.length > (this.options.maxFedRows ?? MAX_FED_ROWS)) {
      this.fedRows = [];
      this.lost = true;
      this.fromFeed = false;
    }
  }

  /** Whether the exporter sends fed rows now instead of reading the ledger; for tests. */
  get exportingFromFeed(): boolean {
    return this.fromFeed;
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.tick()
        .then((delay) => this.schedule(delay))
        .catch((error: unknown) => {
          this.options.logger.warn({ err: errorText(error) }, "usage export failed; retrying");
          this.failures += 1;
          this.schedule(
            backoffDelayMs(this.failures, this.options.retry ?? DEFAULT_RETRY, Math.random),
          );
        });
    }, delayMs);
    this.timer.unref?.();
  }

  /**
   * One round: take or keep the lock, then export until a read comes back
   * short of `readSize` (the ledger had no more then; what commits later
   * waits for the next poll, as it would have after an empty read, without
   * the empty read's query). Returns the delay to the next.
   */
  private async tick(): Promise<number> {
    const poll = this.options.pollMs ?? 1000;
    if (!(await this.holdLock())) return poll;
    const db = await this.options.db();
    if (this.fromFeed) {
      await this.exportFed(db);
      this.failures = 0;
      return poll;
    }
    const full = this.options.readSize ?? DEFAULT_READ_SIZE;
    for (;;) {
      if (this.closed || !(await this.stillHeld())) return poll;
      const { read, passed } = await this.exportBatch(db);
      this.failures = 0;
      if (read < full) {
        if (passed === read) this.caughtUp();
        return poll;
      }
    }
  }

  /** A read found the end of the ledger: from now on, the fed rows after it are the rest. */
  private caughtUp(): void {
    if (!this.options.fed || this.lost || this.closed) return;
    const from = this.position;
    this.fedRows = from ? this.fedRows.filter((fed) => isAfter(fed, from)) : this.fedRows;
    this.fromFeed = true;
  }

  /** Sends the fed rows in the export order, a batch at a time, each batch removed once sent. */
  private async exportFed(db: Kysely<Database>): Promise<void> {
    const size = this.options.batchSize ?? 100;
    while (this.fromFeed && this.fedRows.length > 0 && !this.closed) {
      this.fedRows.sort(byExportOrder);
      const batch = this.fedRows.slice(0, size);
      await this.exportRows(
        db,
        batch.map((fed) => fed.row),
      );
      // Rows fed meanwhile were appended; a dropped feed has nothing left to remove.
      const sent = new Set(batch);
      this.fedRows = this.fedRows.filter((fed) => !sent.has(fed));
    }
  }

  private async holdLock(): Promise<boolean> {
    if (this.options.lockUrl === undefined) {
      this.setLeading(true);
      return true;
    }
    if (this.lock && this.held) return true;
    const client = this.lock ?? (await this.connectLock(this.options.lockUrl));
    try {
      const { rows } = await client.query<{ held: boolean }>(
        "SELECT pg_try_advisory_lock($1) AS held",
        [EXPORT_LOCK_KEY.toString()],
      );
      if (!rows[0]?.held || this.lock !== client) return false;
    } catch (error) {
      this.dropLock(client);
      throw error;
    }
    this.held = true;
    this.setLeading(true);
    return true;
  }

  private async connectLock(url: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
    // The session's end (the server gone, the backend terminated) releases
    // the lock on the server: this replica stops leading with it.
    client.on("error", () => this.dropLock(client));
    client.on("end", () => this.dropLock(client));
    await client.connect();
    if (this.closed) {
      await client.end().catch(() => undefined);
      throw new Error("exporter closed");
    }
    this.lock = client;
    return client;
  }

  /** Before each batch: the lock's session must still be alive, or another replica may lead. */
  private async stillHeld(): Promise<boolean> {
    if (this.options.lockUrl === undefined) return true;
    const client = this.lock;
    if (!client || !this.held) return false;
    try {
      await client.query("SELECT 1");
      return this.lock === client && this.held;
    } catch {
      this.dropLock(client);
      return false;
    }
  }

  private dropLock(client: pg.Client): void {
    if (this.lock !== client) return;
    this.lock = null;
    this.held = false;
    client.end().catch(() => undefined);
    this.setLeading(false);
  }

  private setLeading(held: boolean): void {
    if (this.leading === held) return;
    this.leading = held;
    this.options.logger.info(
      { exporter: HTTP_SINK_CURSOR },
      held ? "usage exporter: this replica exports" : "usage exporter: lock lost",
    );
    this.options.hooks?.onLeadership?.(held);
  }

  /**
   * Reads the next rows after the cursor and sends them a batch at a time,
   * moving the cursor past each batch the sink accepted; returns how many
   * rows it read and how many it passed. Stops early when the lock is lost.
   */
  private async exportBatch(db: Kysely<Database>): Promise<{ read: number; passed: number }> {
    const cursor = await db
      .selectFrom("usage_export_cursor")
      .select([sql<string>`txid::text`.as("txid"), "seq"])
      .where("name", "=", HTTP_SINK_CURSOR)
      .executeTakeFirst();
    const after = cursor ?? { txid: "0", seq: 0 };
    this.movePosition(after.txid, after.seq);
    // What is fed from here on was written after this read, or is in it.
    this.lost = false;
    // Only rows of transactions older than every one still running: no row
    // can commit later behind the cursor (see migration 0002). The order is
    // the table's columns (`l.txid`), not the output's text `txid`: by text,
    // transaction 1000 sorts before 999, and a batch across such a boundary
    // moved the cursor past rows never sent. In the column's order the index
    // gives the rows as they are wanted (an index-only scan that stops at
    // the limit), where the text order fetched and sorted every row after
    // the cursor: a backlog's worth per query (EXPLAIN ANALYZE on PGlite, a
    // 1,000-row backlog, warm: 1.0 to 3.0 ms, now 0.2 to 1.5 ms). The
    // snapshot's xmin is a sub-select, computed once per query.
    const { rows } = await sql<ExportedRow>`
      SELECT l.response_id, l.request_id, l.route, l.account, l.project, l.key_id, l.model,
             l.input_tokens, l.output_tokens, l.cost::text AS cost, l.currency, l.answered_at,
             l.txid::text AS txid, l.seq
      FROM usage_ledger l
      WHERE (l.txid, l.seq) > (${after.txid}::xid8, ${after.seq}::int8)
        AND l.txid < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
      ORDER BY l.txid, l.seq
      LIMIT ${this.options.readSize ?? DEFAULT_READ_SIZE}
    `.execute(db);
    const size = this.options.batchSize ?? 100;
    for (let start = 0; start < rows.length; start += size) {
      if (start > 0 && (this.closed || !(await this.stillHeld()))) {
        return { read: rows.length, passed: start };
      }
      await this.exportRows(db, rows.slice(start, start + size));
    }
    return { read: rows.length, passed: rows.length };
  }

  private movePosition(txid: string, seq: number | string): void {
    const next = { txid: BigInt(txid), seq: BigInt(seq) };
    if (!this.position || isAfter(next, this.position)) this.position = next;
  }

  /** One batch: to the sink, then the cursor past its last row. */
  private async exportRows(db: Kysely<Database>, rows: readonly ExportedRow[]): Promise<void> {
    const wanted = rows.filter((row) => row.route === EXPORTED_ROUTE);
    if (wanted.length > 0) await this.deliver(wanted);
    const last = rows[rows.length - 1]!;
    // Forward only: a replica that lost the lock mid-batch never moves the
    // cursor back over what the new holder already sent.
    await sql`
      INSERT INTO usage_export_cursor (name, txid, seq, updated_at)
      VALUES (${HTTP_SINK_CURSOR}, ${last.txid}::xid8, ${last.seq}::int8, now())
      ON CONFLICT (name) DO UPDATE SET txid = excluded.txid, seq = excluded.seq, updated_at = now()
      WHERE (usage_export_cursor.txid, usage_export_cursor.seq) < (excluded.txid, excluded.seq)
    `.execute(db);
    this.movePosition(last.txid, last.seq);
    this.options.hooks?.onExported?.(wanted);
  }

  /**
   * The sink takes a batch whole or refuses it. Refused for good: each row
   * alone, so that one bad row is passed over (logged) and the rest land.
   */
  private async deliver(rows: readonly ExportedRow[]): Promise<void> {
    const items = rows.map((row) => ({ key: row.response_id, record: toWireLedgerRecord(row) }));
    try {
      await this.options.send(items, { signal: this.abort.signal });
      return;
    } catch (error) {
      if (this.options.isRetryable(error)) throw error;
      if (rows.length === 1) {
        this.options.logger.error(
          { responseId: rows[0]!.response_id, err: errorText(error) },
          "usage sink refused a record for good; passed over",
        );
        this.options.hooks?.onRefused?.(rows[0]!, error);
        return;
      }
    }
    for (const row of rows) await this.deliver([row]);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    await this.running?.catch(() => undefined);
    const client = this.lock;
    this.lock = null;
    this.held = false;
    await client?.end().catch(() => undefined);
    this.leading = false;
  }
}

function isAfter(
  row: { txid: bigint; seq: bigint },
  position: { txid: bigint; seq: bigint },
): boolean {
  return row.txid > position.txid || (row.txid === position.txid && row.seq > position.seq);
}

function byExportOrder(a: FedRow, b: FedRow): number {
  if (a.txid !== b.txid) return a.txid < b.txid ? -1 : 1;
  return a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0;
}

/**
 * The row as the exporter's read returns it, from the entry it was written
 * from: `cost` as PostgreSQL's `numeric` prints it (the decimal's scale is
 * kept; leading zeros of the whole part are not).
 */
function exportedRowOf(entry: LedgerEntry, txid: string, seq: string): ExportedRow {
  return {
    response_id: entry.responseId,
    request_id: entry.requestId,
    route: entry.route,
    account: entry.account,
    project: entry.project,
    key_id: entry.keyId,
    model: entry.model,
    input_tokens: entry.inputTokens,
    output_tokens: entry.outputTokens,
    cost: entry.cost.replace(/^0+(?=[0-9])/, ""),
    currency: entry.currency,
    answered_at: new Date(entry.time),
    txid,
    seq: Number(seq),
  };
}

/** Rows read per query, unless set. */
const DEFAULT_READ_SIZE = 500;

const DEFAULT_RETRY: RetryPolicy = { baseDelayMs: 500, maxDelayMs: 60_000 };
