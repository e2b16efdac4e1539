import { sql, type Kysely } from "kysely";

/**
 * Stored responses (`store: true`): the answer as it was sent and the
 * request's input items, both as JSON text (never queried inside, so text
 * costs nothing to write or to send back), scoped by `owner`, the gateway's
 * key for the verified caller. `previous_response_id` links the turns of a
 * conversation. Rows are read only through `owner` and before `expires_at`,
 * and the sweeper deletes them by `expires_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE stored_responses (
      id                   text PRIMARY KEY,
      owner                text NOT NULL,
      model                text NOT NULL,
      previous_response_id text,
      input_items          text NOT NULL,
      response             text NOT NULL,
      served_by            text,
      created_at           timestamptz NOT NULL,
      expires_at           timestamptz NOT NULL
    )
  `.execute(db);
  await sql`CREATE INDEX stored_responses_expiry ON stored_responses (expires_at)`.execute(db);
}
