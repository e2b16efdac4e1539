import { sql, type Kysely } from "kysely";

/**
 * The Batch object's `model` and `usage`, as OpenAI's has them.
 *
 * - `batches.model`: the model every line of the batch names, set when its
 *   file is validated; null while validating, and for a batch whose lines
 *   name more than one. Batches validated before are read from their lines.
 * - `batch_counts` gains the token sums of the completed lines, added in
 *   the same transaction as the results they sum, as the counts are.
 *   Batches with results before this migration get them summed from those
 *   results, in a slot of their own.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE batches ADD COLUMN model text`.execute(db);
  await sql`
    UPDATE batches AS b SET model = one.model
    FROM (
      SELECT batch_id, min((body::json)->>'model') AS model FROM batch_lines
      GROUP BY batch_id HAVING count(DISTINCT (body::json)->>'model') = 1
    ) AS one
    WHERE one.batch_id = b.id
  `.execute(db);
  await sql`
    ALTER TABLE batch_counts
      ADD COLUMN input_tokens  bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
      ADD COLUMN cached_tokens bigint NOT NULL DEFAULT 0 CHECK (cached_tokens >= 0),
      ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0)
  `.execute(db);
  await sql`
    INSERT INTO batch_counts (batch_id, slot, input_tokens, cached_tokens, output_tokens)
    SELECT batch_id, 'migrated-usage',
      coalesce(sum(((result::json) #>> '{response,body,usage,input_tokens}')::bigint), 0),
      coalesce(sum(((result::json)
        #>> '{response,body,usage,input_tokens_details,cached_tokens}')::bigint), 0),
      coalesce(sum(((result::json) #>> '{response,body,usage,output_tokens}')::bigint), 0)
    FROM batch_lines WHERE state = 'completed' GROUP BY batch_id
  `.execute(db);
}
