import { sql, type Kysely } from "kysely";

/**
 * What reading and exporting the ledger need.
 *
 * Reads: an account reads its usage over a time range (0001's index on
 * `(account, answered_at)` serves it); an admin reads every account's, which
 * wants an index on the time alone.
 *
 * Export: one exporter hands the ledger's rows to the HTTP usage sink in
 * order, after a durable cursor. A sequence alone cannot be that order: two
 * writers take numbers 4 and 5, 5 commits first, the exporter reads it and
 * moves its cursor past 4, which then commits and is never exported. Each
 * row therefore records the id of the transaction that wrote it
 * (`pg_current_xact_id()`, an `xid8`, which never wraps around), and the
 * exporter only reads rows whose transaction is older than every one still
 * running (`pg_snapshot_xmin`): no row can appear later behind the cursor.
 * `seq` orders the rows of one transaction (one batch).
 *
 * Rows already in the ledger were delivered by the per-pod sink of the
 * version before, if one was configured: the cursor starts after them, so
 * an upgrade does not send the whole history again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX usage_ledger_time ON usage_ledger (answered_at)`.execute(db);
  await sql`
    ALTER TABLE usage_ledger
      ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      ADD COLUMN seq bigserial NOT NULL
  `.execute(db);
  await sql`CREATE INDEX usage_ledger_export_order ON usage_ledger (txid, seq)`.execute(db);
  await sql`
    CREATE TABLE usage_export_cursor (
      name text PRIMARY KEY,
      txid xid8 NOT NULL,
      seq  bigint NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db);
  await sql`
    INSERT INTO usage_export_cursor (name, txid, seq)
    SELECT 'http-sink', coalesce(max(txid), '0'::xid8), coalesce(max(seq), 0) FROM usage_ledger
  `.execute(db);
}
