import { sql, type Kysely } from "kysely";
import type { Database } from "./database.js";
import type { LedgerEntry } from "./ledger-entry.js";

/**
 * Writes entries to the ledger atomically and returns how many were
 * new. A response id already there is skipped (`ON CONFLICT DO NOTHING`),
 * never updated: a batch sent again after a timeout, or an entry replayed
 * from the journal after a crash, lands once, as first written.
 *
 * One statement whatever the batch's size: each column goes as one array
 * parameter and `unnest` turns the arrays back into rows. A multi-row
 * VALUES list would take 14 parameters per row, which the database parses,
 * binds and plans one by one: on the embedded PGlite that made each row
 * cost a quarter more (docs/state.md), and above 5,000 rows it passes
 * PostgreSQL's 65,535-parameter limit. One statement is atomic on its own,
 * so no transaction (two more round trips) is needed either.
 */
export async function recordLedgerEntries(
  db: Kysely<Database>,
  entries: readonly LedgerEntry[],
): Promise<number> {
  if (entries.length === 0) return 0;
  const result = await insertEntries(db, entries, false);
  return Number(result.numAffectedRows ?? 0n);
}

/** Where an inserted row sits in the export order (migration 0002). */
export interface LedgerPosition {
  response_id: string;
  txid: string;
  seq: string;
}

/**
 * `recordLedgerEntries`, returning where each row that was new to the
 * ledger landed in the export order (rows already there are not returned):
 * what the embedded ledger's exporter is fed instead of reading the rows
 * back (ledger-exporter.ts). Three short columns a row, against the
 * fourteen the exporter's read parses.
 */
export async function recordLedgerEntriesReturning(
  db: Kysely<Database>,
  entries: readonly LedgerEntry[],
): Promise<LedgerPosition[]> {
  if (entries.length === 0) return [];
  const result = await insertEntries(db, entries, true);
  return result.rows as LedgerPosition[];
}

function insertEntries(db: Kysely<Database>, entries: readonly LedgerEntry[], returning: boolean) {
  const column = <K extends keyof LedgerEntry>(key: K): LedgerEntry[K][] =>
    entries.map((entry) => entry[key]);
  return sql`
    INSERT INTO usage_ledger (
      response_id, route, account, project, key_id, agent_id, model,
      input_tokens, output_tokens, cached_tokens, cost, currency, request_id, answered_at
    )
    SELECT * FROM unnest(
      ${column("responseId")}::text[], ${column("route")}::text[],
      ${column("account")}::text[], ${column("project")}::text[],
      ${column("keyId")}::text[], ${column("agentId")}::text[], ${column("model")}::text[],
      ${column("inputTokens")}::integer[], ${column("outputTokens")}::integer[],
      ${entries.map((entry) => entry.cachedTokens ?? 0)}::integer[],
      ${column("cost")}::numeric[], ${column("currency")}::text[],
      ${column("requestId")}::text[], ${column("time")}::timestamptz[]
    )
    ON CONFLICT (response_id) DO NOTHING
    ${returning ? sql`RETURNING response_id, txid::text AS txid, seq::text AS seq` : sql``}
  `.execute(db);
}
