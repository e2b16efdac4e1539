import type { Kysely } from "kysely";
import type { OutboxSend, OutboxSendBatch } from "../outbox/durable-outbox.js";
import type { Database } from "./database.js";
import type { LedgerEntry } from "./ledger-entry.js";
import {
  recordLedgerEntries,
  recordLedgerEntriesReturning,
  type LedgerPosition,
} from "./usage-ledger.js";

export interface LedgerSinkHooks {
  /** After each batch: how many entries it held and how many were new to the ledger. */
  onWritten?(entries: number, inserted: number): void;
  /** After a batch failed, with the error the outbox sees. */
  onFailed?(error: unknown): void;
  /**
   * After each batch, the entries that were new to the ledger with where
   * each landed in the export order. Set only where one process owns the
   * ledger (the embedded one): its exporter is fed these instead of reading
   * the rows back (ledger-exporter.ts).
   */
  onRecorded?(recorded: readonly RecordedEntry[]): void;
}

export interface RecordedEntry {
  readonly entry: LedgerEntry;
  readonly position: LedgerPosition;
}

/**
 * The durable outbox's batch sender for the ledger: the journal stays the
 * write-ahead buffer (the answer waits for the journal, never for the
 * database) and the outbox ships what it holds here in batches. Resolving
 * means the ledger has every entry of the batch; the ledger's key makes a
 * batch that is sent again land once. `db` may be a function that waits
 * for the store to open (and rejects while it cannot: a retryable failure).
 */
export function createLedgerSender(
  db: Kysely<Database> | (() => Promise<Kysely<Database>>),
  hooks: LedgerSinkHooks = {},
): OutboxSendBatch<LedgerEntry> {
  return async (items) => {
    let inserted: number;
    let recorded: RecordedEntry[] | null = null;
    try {
      const handle = typeof db === "function" ? await db() : db;
      const entries = items.map((item) => item.record);
      if (hooks.onRecorded) {
        const positions = await recordLedgerEntriesReturning(handle, entries);
        recorded = recordedEntries(entries, positions);
        inserted = positions.length;
      } else {
        inserted = await recordLedgerEntries(handle, entries);
      }
    } catch (error) {
      hooks.onFailed?.(error);
      throw error;
    }
    hooks.onWritten?.(items.length, inserted);
    if (recorded) hooks.onRecorded?.(recorded);
  };
}

/** The entries the ledger returned a position for: those new to it. */
function recordedEntries(
  entries: readonly LedgerEntry[],
  positions: readonly LedgerPosition[],
): RecordedEntry[] {
  const byId = new Map(entries.map((entry) => [entry.responseId, entry]));
  return positions.flatMap((position) => {
    const entry = byId.get(position.response_id);
    return entry ? [{ entry, position }] : [];
  });
}

/**
 * A batch sender for records that go to the ledger and then, each on its
 * own, to a service that takes one record per call (the payment
 * provider's settlements). The ledger gets the whole batch in one
 * statement: written alone, a row costs the embedded PGlite about 0.8 ms
 * of the event loop's CPU, in a batch about 0.03 ms (docs/state.md). Then
 * every record is delivered at once; if any delivery fails, the batch
 * fails with a retryable error among them if there is one (the outbox
 * retries the batch later), else with one of the refusals (the outbox
 * sends each record alone, so that only the refused one is parked).
 * Either way the ledger and the service see some records again, under the
 * same keys, and both dedupe on them.
 */
export function ledgerThenEach<T>(
  toLedger: OutboxSendBatch<LedgerEntry>,
  entryOf: (record: T) => LedgerEntry,
  deliver: OutboxSend<T>,
  isRetryable: (error: unknown) => boolean,
): OutboxSendBatch<T> {
  return async (items, options) => {
    await toLedger(
      items.map((item) => ({ key: item.key, record: entryOf(item.record) })),
      options,
    );
    const outcomes = await Promise.allSettled(
      items.map((item) => deliver(item.record, item.key, options)),
    );
    const errors = outcomes.flatMap((outcome) =>
      outcome.status === "rejected" ? [outcome.reason as unknown] : [],
    );
    if (errors.length > 0) throw errors.find(isRetryable) ?? errors[0];
  };
}

/**
 * The outbox's `isRetryable` for ledger writes. PostgreSQL's SQLSTATE
 * classes 22 (data exception) and 23 (integrity constraint violation) say
 * that an entry itself is wrong: retrying cannot help, so the outbox splits
 * the batch and parks the bad entry. Anything else (the server unreachable
 * or restarting, a connection lost, a lock timeout) is retried: losing a
 * usage record is the worse failure.
 */
export function isRetryableLedgerError(error: unknown): boolean {
  const code = sqlState(error);
  return !(code?.startsWith("22") || code?.startsWith("23"));
}

function sqlState(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null || !("code" in error)) return undefined;
  const { code } = error;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}
