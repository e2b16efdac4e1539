import { sql, type Kysely } from "kysely";

/**
 * The Batch object's `model` and `usage`, as OpenAI's has them.
 *
 * - `batches.model`: the model every line of the batch names, set when its
 *   file is validated; null while validating, and for a batch whose lines
 *   name more than one. Batches validated before are read from their lines.
 * - `batch_counts` gains the token sums of the completed lines, added in
 *   the same transaction as the results they sum, as the counts are.
 *   Batches with results before this migration get them from the ledger
 *   (what was billed), in a slot of their own.
 *
 * Nothing here reads JSON in SQL: PostgreSQL's `json` refuses the `\u0000`
 * escape (and a lone surrogate), which a line's body or answer may hold.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE batches ADD COLUMN model text`.execute(db);
  await sql`
    ALTER TABLE batch_counts
      ADD COLUMN input_tokens  bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
      ADD COLUMN cached_tokens bigint NOT NULL DEFAULT 0 CHECK (cached_tokens >= 0),
      ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0)
  `.execute(db);
  // Until this release a batch line's ledger row had the output line's id
  // as its request_id, and the result's JSON text opens with that id.
  await sql`
    INSERT INTO batch_counts (batch_id, slot, input_tokens, cached_tokens, output_tokens)
    SELECT l.batch_id, 'migrated-usage',
      sum(u.input_tokens), sum(u.cached_tokens), sum(u.output_tokens)
    FROM batch_lines AS l
    JOIN usage_ledger AS u
      ON u.route = '/v1/batches'
      AND u.request_id = substring(l.result from '^[{]"id":"(batch_req_[0-9a-f]{24})"')
    WHERE l.state = 'completed'
    GROUP BY l.batch_id
  `.execute(db);
  await fillModels(db);
}

const PAGE = 1000;

/** The model a line's body names; null when it names none (never written so). */
function modelOf(body: string): string | null {
  try {
    const model = (JSON.parse(body) as { model?: unknown }).model;
    return typeof model === "string" ? model : null;
  } catch {
    return null;
  }
}

/** Each batch's one model, from its lines read a page at a time. */
async function fillModels(db: Kysely<unknown>): Promise<void> {
  const models = new Map<string, Set<string | null>>();
  let after: { batch_id: string; line_no: number } | undefined;
  for (;;) {
    const { rows } = await sql<{ batch_id: string; line_no: number; body: string }>`
      SELECT batch_id, line_no, body FROM batch_lines
      WHERE ${after ? sql`(batch_id, line_no) > (${after.batch_id}, ${after.line_no})` : sql`true`}
      ORDER BY batch_id, line_no
      LIMIT ${PAGE}
    `.execute(db);
    for (const row of rows) {
      const seen = models.get(row.batch_id) ?? new Set<string | null>();
      if (seen.size < 2) seen.add(modelOf(row.body));
      models.set(row.batch_id, seen);
    }
    if (rows.length < PAGE) break;
    after = rows[rows.length - 1];
  }
  for (const [batchId, seen] of models) {
    const [model] = [...seen];
    if (seen.size !== 1 || typeof model !== "string") continue;
    await sql`UPDATE batches SET model = ${model} WHERE id = ${batchId}`.execute(db);
  }
}
