import type { Insertable, Kysely } from "kysely";
import type { Database, UsageLedgerTable } from "./database.js";
import type { LedgerEntry } from "./ledger-entry.js";

/**
 * Rows per INSERT statement, at most: PostgreSQL allows 65,535 bind
 * parameters per statement and a row takes 13.
 */
const ROWS_PER_STATEMENT = 1000;

export function toLedgerRow(entry: LedgerEntry): Insertable<UsageLedgerTable> {
  return {
    response_id: entry.responseId,
    route: entry.route,
    account: entry.account,
    project: entry.project,
    key_id: entry.keyId,
    agent_id: entry.agentId,
    model: entry.model,
    input_tokens: entry.inputTokens,
    output_tokens: entry.outputTokens,
    cost: entry.cost,
    currency: entry.currency,
    request_id: entry.requestId,
    answered_at: entry.time,
  };
}

/**
 * Writes entries to the ledger atomically and returns how many were
 * new. A response id already there is skipped (`ON CONFLICT DO NOTHING`),
 * never updated: a batch sent again after a timeout, or an entry replayed
 * from the journal after a crash, lands once, as first written.
 */
export async function recordLedgerEntries(
  db: Kysely<Database>,
  entries: readonly LedgerEntry[],
): Promise<number> {
  if (entries.length === 0) return 0;
  const rows = entries.map(toLedgerRow);
  const insert = async (into: Kysely<Database>, part: Insertable<UsageLedgerTable>[]) => {
    const result = await into
      .insertInto("usage_ledger")
      .values(part)
      .onConflict((conflict) => conflict.column("response_id").doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n);
  };
  // One statement is atomic on its own: a transaction around it would only
  // add two round trips (BEGIN, COMMIT) to every batch.
  if (rows.length <= ROWS_PER_STATEMENT) return insert(db, rows);
  return db.transaction().execute(async (trx) => {
    let inserted = 0;
    for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
      inserted += await insert(trx, rows.slice(start, start + ROWS_PER_STATEMENT));
    }
    return inserted;
  });
}
