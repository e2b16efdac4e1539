import { sql, type Kysely } from "kysely";

/**
 * A batch's `output_expires_after[seconds]`, as OpenAI's Batch API takes it:
 * how long its output and error files are kept after they are written. Null
 * (every batch made before, and one that names none) keeps them thirty days.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE batches
      ADD COLUMN output_expires_after_seconds integer
        CHECK (output_expires_after_seconds BETWEEN 3600 AND 2592000)
  `.execute(db);
}
