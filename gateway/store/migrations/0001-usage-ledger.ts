import { sql, type Kysely } from "kysely";

/**
 * The usage ledger. Written as SQL rather than through the schema builder
 * so that it reads as what PostgreSQL runs; `numeric` without a scale keeps
 * a cost exact whatever the price's decimals. Migrations only ever go
 * forward: a change is a new migration, never an edit of this one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE usage_ledger (
      response_id   text PRIMARY KEY,
      route         text NOT NULL CHECK (route IN ('/v1/responses', '/pay/v1/responses')),
      account       text NOT NULL,
      project       text,
      key_id        text,
      agent_id      text,
      model         text NOT NULL,
      input_tokens  integer NOT NULL CHECK (input_tokens >= 0),
      output_tokens integer NOT NULL CHECK (output_tokens >= 0),
      cost          numeric NOT NULL CHECK (cost >= 0),
      currency      text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
      request_id    text NOT NULL,
      answered_at   timestamptz NOT NULL,
      recorded_at   timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db);
  // Usage is read per account over a time range (per day, with totals).
  await sql`CREATE INDEX usage_ledger_account_time ON usage_ledger (account, answered_at)`.execute(
    db,
  );
}
