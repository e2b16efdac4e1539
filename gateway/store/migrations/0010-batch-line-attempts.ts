import { sql, type Kysely } from "kysely";

/**
 * How many times a runtime answered a batch line's request with a failure
 * (a 5xx other than 503). A line answered that way every time (a request
 * the runtime cannot answer) is given up on after a few, instead of being
 * sent again every second until the batch's window ends.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE batch_lines ADD COLUMN attempts smallint NOT NULL DEFAULT 0`.execute(db);
}
