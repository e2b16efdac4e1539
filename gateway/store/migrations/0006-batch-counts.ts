import { sql, type Kysely } from "kysely";

/**
 * A batch's `request_counts` kept as counters instead of counted from its
 * lines on every read: counting 50,000 lines per `batches.retrieve` made a
 * polled batch's store cost grow with the square of its size.
 *
 * Each writer of results adds to a row of its own (`slot`: the worker's id,
 * or `final` for the lines a finalization fails), in the same transaction as
 * the results it counts, so the counts never disagree with the lines and no
 * two workers wait on one counter row; a read sums the batch's slots.
 *
 * `batch_lines` rows are updated twice each (leased, then given their
 * result): pages are left a quarter free so a lease's update stays on its
 * page (a HOT update, no new index entries), and autovacuum visits the table
 * after a few percent of its rows changed, not a fifth, so that a running
 * batch's dead versions are cleared while it runs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE batch_counts (
      batch_id  text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
      slot      text NOT NULL,
      completed integer NOT NULL DEFAULT 0 CHECK (completed >= 0),
      failed    integer NOT NULL DEFAULT 0 CHECK (failed >= 0),
      PRIMARY KEY (batch_id, slot)
    )
  `.execute(db);
  await sql`
    INSERT INTO batch_counts (batch_id, slot, completed, failed)
    SELECT batch_id, 'migrated',
      count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'failed')
    FROM batch_lines WHERE state <> 'pending' GROUP BY batch_id
  `.execute(db);
  await sql`
    ALTER TABLE batch_lines SET (fillfactor = 75,
      autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02)
  `.execute(db);
}
