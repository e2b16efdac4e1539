import { sql, type Kysely } from "kysely";

/**
 * The prompt tokens a runtime read from its prefix cache, per ledger row, so
 * that the usage API reports `input_cached_tokens` as OpenAI's does. Rows
 * written before (and entries journaled by a gateway that did not know the
 * count) hold 0: no cache hit is ever invented. `input_tokens` still counts
 * the whole prompt (billing does not change).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE usage_ledger
      ADD COLUMN cached_tokens integer NOT NULL DEFAULT 0 CHECK (cached_tokens >= 0)
  `.execute(db);
}
