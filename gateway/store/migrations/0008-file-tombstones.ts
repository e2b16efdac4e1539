import { sql, type Kysely } from "kysely";

/**
 * What a deleted or expired file leaves behind for listing: its id, owner
 * and `created_at`, its place in `GET /v1/files`. The OpenAI clients page
 * with `after=<last id of the previous page>`, and their usual cleanup loop
 * deletes each file it is handed, so the next page's cursor names a file
 * that is gone; the tombstone keeps that cursor a position for its owner.
 * Only the owner's own lookups read it, so it tells no one else anything.
 * `gone_at` is when the file went: the batch worker's sweep drops
 * tombstones a day after (`file_tombstones_gone_at` keeps that sweep off
 * the rest of the table).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE file_tombstones (
      id          text PRIMARY KEY,
      account     text NOT NULL,
      project     text,
      created_at  timestamptz NOT NULL,
      gone_at     timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db);
  await sql`CREATE INDEX file_tombstones_gone_at ON file_tombstones (gone_at)`.execute(db);
}
