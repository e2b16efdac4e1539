import { sql, type Kysely } from "kysely";

/**
 * How many times a batch line's request failed at a runtime that had it
 * (an answered 5xx, or a connection that broke once the request was sent).
 * A line that fails that way every time (a request the runtime cannot
 * answer, or one that crashes it) is given up on after a few, instead of
 * being sent again every second until the batch's window ends.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE batch_lines ADD COLUMN attempts smallint NOT NULL DEFAULT 0`.execute(db);
}
