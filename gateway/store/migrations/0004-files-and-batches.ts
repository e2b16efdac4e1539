import { sql, type Kysely } from "kysely";

/**
 * Files and batches (issue 17), in the system of record beside the ledger.
 *
 * A file's content is kept as ordered chunks of bytes: an upload is written
 * chunk by chunk as it arrives (never whole in memory), and a download reads
 * them back in order. A batch's requests become one row each in
 * `batch_lines` when it is validated: workers lease those rows (`FOR UPDATE
 * SKIP LOCKED`, with an expiry), so any number of gateways share one batch
 * and a line's result is written once, with its usage in the same
 * transaction. Batch usage is a ledger route of its own.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE files (
      id          text PRIMARY KEY,
      account     text NOT NULL,
      project     text,
      purpose     text NOT NULL,
      filename    text NOT NULL,
      bytes       bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
      lines       integer NOT NULL DEFAULT 0 CHECK (lines >= 0),
      -- 'uploading' until the last chunk is in: never listed nor read.
      state       text NOT NULL CHECK (state IN ('uploading', 'processed')),
      created_at  timestamptz NOT NULL,
      expires_at  timestamptz
    )
  `.execute(db);
  await sql`CREATE INDEX files_account_created ON files (account, created_at, id)`.execute(db);
  await sql`
    CREATE TABLE file_chunks (
      file_id text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
      seq     integer NOT NULL,
      data    bytea NOT NULL,
      PRIMARY KEY (file_id, seq)
    )
  `.execute(db);
  await sql`
    CREATE TABLE batches (
      id                text PRIMARY KEY,
      account           text NOT NULL,
      project           text,
      key_id            text NOT NULL,
      input_file_id     text NOT NULL,
      endpoint          text NOT NULL,
      completion_window text NOT NULL,
      status            text NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress',
                          'finalizing', 'completed', 'expired', 'cancelling', 'cancelled')),
      metadata          jsonb,
      errors            jsonb,
      output_file_id    text,
      error_file_id     text,
      total             integer NOT NULL DEFAULT 0,
      created_at        timestamptz NOT NULL,
      expires_at        timestamptz NOT NULL,
      in_progress_at    timestamptz,
      finalizing_at     timestamptz,
      completed_at      timestamptz,
      failed_at         timestamptz,
      expired_at        timestamptz,
      cancelling_at     timestamptz,
      cancelled_at      timestamptz
    )
  `.execute(db);
  await sql`CREATE INDEX batches_account_created ON batches (account, created_at, id)`.execute(db);
  await sql`CREATE INDEX batches_active ON batches (status) WHERE status IN ('validating', 'in_progress', 'cancelling')`.execute(
    db,
  );
  await sql`
    CREATE TABLE batch_lines (
      batch_id    text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
      line_no     integer NOT NULL,
      custom_id   text NOT NULL,
      body        text NOT NULL,
      -- pending until its one result is written: 'completed' (a 200) or 'failed'.
      state       text NOT NULL CHECK (state IN ('pending', 'completed', 'failed')),
      lease_owner text,
      lease_until timestamptz,
      result      text,
      PRIMARY KEY (batch_id, line_no),
      UNIQUE (batch_id, custom_id)
    )
  `.execute(db);
  await sql`CREATE INDEX batch_lines_pending ON batch_lines (batch_id, line_no) WHERE state = 'pending'`.execute(
    db,
  );
  // Batch usage is recorded as a route of its own, priced with the batch discount.
  await sql`ALTER TABLE usage_ledger DROP CONSTRAINT usage_ledger_route_check`.execute(db);
  await sql`
    ALTER TABLE usage_ledger ADD CONSTRAINT usage_ledger_route_check
      CHECK (route IN ('/v1/responses', '/pay/v1/responses', '/v1/batches'))
  `.execute(db);
}
