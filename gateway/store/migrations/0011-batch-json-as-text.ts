import { sql, type Kysely } from "kysely";

/**
 * A batch's `metadata` and `errors` kept as JSON text, as stored responses
 * keep theirs, instead of `jsonb`. jsonb refuses the `\u0000` escape, so a
 * batch whose metadata held a NUL character, or whose line errors quoted
 * one from its file, could not be written: its create was a 500, its
 * validation failed over and over. Text takes any JSON the gateway writes;
 * nothing queries inside these columns.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE batches
      ALTER COLUMN metadata TYPE text USING metadata::text,
      ALTER COLUMN errors TYPE text USING errors::text
  `.execute(db);
}
